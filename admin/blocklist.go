package admin

import (
	"errors"
	"slices"

	"github.com/valyala/fasthttp"

	"seckill/blocklist"
)

// The blocklist routes keep the admin API's entries in Redis; every edge
// applies a change within milliseconds (event) or at its next refresh
// (edge.blocklist.refresh_interval). Entries of the configuration are
// listed but can only be removed by changing the configuration.
//
//	GET    /admin/v1/blocklist               {"ips":[…],"users":[…],"configured":{"ips":[…],"users":[…]}}
//	PUT    /admin/v1/blocklist/ips/{ip}      block an address or CIDR prefix ("10.0.0.0/8" as is)
//	DELETE /admin/v1/blocklist/ips/{ip}      unblock it
//	PUT    /admin/v1/blocklist/users/{id}    block a user
//	DELETE /admin/v1/blocklist/users/{id}    unblock a user

// BlocklistView answers GET /admin/v1/blocklist.
type BlocklistView struct {
	IPs        []string        `json:"ips"`   // admin API entries (Redis)
	Users      []int64         `json:"users"` // admin API entries (Redis)
	Configured BlocklistConfig `json:"configured"`
}

// BlockAnswer answers the PUT and DELETE routes.
type BlockAnswer struct {
	IP      string `json:"ip,omitempty"`   // canonical form
	User    int64  `json:"user,omitempty"` // user id
	Blocked bool   `json:"blocked"`        // blocked after this call (by the API or the configuration)
	Changed bool   `json:"changed"`        // the call added or removed an entry
	Note    string `json:"note,omitempty"`
}

const noteConfigured = "also in edge.blocklist of the configuration: stays blocked until the configuration changes"

func (s *Server) blocklistReady(ctx *fasthttp.RequestCtx) bool {
	if s.d.Blocklist == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, "UNAVAILABLE", "no blocklist store in this process")
		return false
	}
	return true
}

func (s *Server) listBlocklist(ctx *fasthttp.RequestCtx) {
	if !s.blocklistReady(ctx) {
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	set, _, err := s.d.Blocklist.Load(c)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	v := BlocklistView{IPs: set.IPs(), Users: set.Users(), Configured: s.d.BlocklistConfig}
	if v.IPs == nil {
		v.IPs = []string{}
	}
	if v.Configured.IPs == nil {
		v.Configured.IPs = []string{}
	}
	if v.Configured.Users == nil {
		v.Configured.Users = []int64{}
	}
	writeJSON(ctx, fasthttp.StatusOK, v)
}

func (s *Server) blockIP(ctx *fasthttp.RequestCtx)   { s.setIP(ctx, true) }
func (s *Server) unblockIP(ctx *fasthttp.RequestCtx) { s.setIP(ctx, false) }

func (s *Server) setIP(ctx *fasthttp.RequestCtx, block bool) {
	if !s.blocklistReady(ctx) {
		return
	}
	entry, _ := ctx.UserValue("ip").(string)
	c, cancel := opCtx(ctx)
	defer cancel()
	var (
		canon   string
		changed bool
		err     error
	)
	if block {
		canon, changed, err = s.d.Blocklist.AddIP(c, entry)
	} else {
		canon, changed, err = s.d.Blocklist.RemoveIP(c, entry)
	}
	if errors.Is(err, blocklist.ErrBadEntry) {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	a := BlockAnswer{IP: canon, Blocked: block, Changed: changed}
	if !block && s.configuredIP(canon) {
		a.Blocked, a.Note = true, noteConfigured
	}
	writeJSON(ctx, fasthttp.StatusOK, a)
}

func (s *Server) configuredIP(canon string) bool {
	for _, e := range s.d.BlocklistConfig.IPs {
		if c, err := blocklist.ParseIP(e); err == nil && c == canon {
			return true
		}
	}
	return false
}

func (s *Server) blockUser(ctx *fasthttp.RequestCtx)   { s.setUser(ctx, true) }
func (s *Server) unblockUser(ctx *fasthttp.RequestCtx) { s.setUser(ctx, false) }

func (s *Server) setUser(ctx *fasthttp.RequestCtx, block bool) {
	if !s.blocklistReady(ctx) {
		return
	}
	id, ok := pathInt(ctx, "id")
	if !ok {
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	var (
		changed bool
		err     error
	)
	if block {
		changed, err = s.d.Blocklist.AddUser(c, id)
	} else {
		changed, err = s.d.Blocklist.RemoveUser(c, id)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	a := BlockAnswer{User: id, Blocked: block, Changed: changed}
	if !block && slices.Contains(s.d.BlocklistConfig.Users, id) {
		a.Blocked, a.Note = true, noteConfigured
	}
	writeJSON(ctx, fasthttp.StatusOK, a)
}
