package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// modeView is one SKU's line of the admin API's mode answers.
type modeView struct {
	ActivityID int64  `json:"activityId"`
	SKUID      int64  `json:"skuId"`
	Mode       string `json:"mode"`
	Rate       int64  `json:"rate"`
}

// adminMode is `seckill admin mode [SKU [direct|queue] [rate=N]
// [activity=A]]`: every SKU's mode, one SKU's, or a switch of one.
func adminMode(c adminClient, args []string, asJSON bool, out io.Writer) error {
	method, path := "GET", "/admin/v1/modes"
	var body []byte
	list := len(args) == 0
	if !list {
		if _, err := strconv.ParseInt(args[0], 10, 64); err != nil {
			return fmt.Errorf("mode: %q is not a sku id", args[0])
		}
		set := map[string]any{}
		activity := ""
		for _, a := range args[1:] {
			k, v, kv := strings.Cut(a, "=")
			switch {
			case !kv && (a == "queue" || a == "direct"):
				set["mode"] = a
			case kv && k == "rate":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("mode: rate %q must be attempts per second, 0 or more", v)
				}
				set["rate"] = n
			case kv && k == "activity":
				if _, err := strconv.ParseInt(v, 10, 64); err != nil {
					return fmt.Errorf("mode: activity %q is not an activity id", v)
				}
				activity = v
			default:
				return fmt.Errorf("mode: %q is none of direct, queue, rate=N, activity=A", a)
			}
		}
		path = "/admin/v1/skus/" + args[0] + "/mode"
		if activity != "" {
			path += "?activityId=" + activity
		}
		if len(set) > 0 {
			method = "PUT"
			body, _ = json.Marshal(set)
		}
	}
	status, resp, err := c.do(context.Background(), method, path, body)
	if err != nil {
		return err
	}
	if status >= 300 {
		var e struct{ Code, Message string }
		_ = json.Unmarshal(resp, &e)
		return fmt.Errorf("%s %s: %d %s: %s", method, path, status, e.Code, e.Message)
	}
	if asJSON {
		out.Write(resp)
		fmt.Fprintln(out)
		return nil
	}
	var views []modeView
	if list {
		err = json.Unmarshal(resp, &views)
	} else {
		var v modeView
		err = json.Unmarshal(resp, &v)
		views = append(views, v)
	}
	if err != nil {
		return fmt.Errorf("%s %s: unreadable answer: %w", method, path, err)
	}
	fmt.Fprintf(out, "%-10s %-10s %-7s %s\n", "ACTIVITY", "SKU", "MODE", "RATE/S")
	for _, v := range views {
		rate := "shard"
		if v.Rate > 0 {
			rate = strconv.FormatInt(v.Rate, 10)
		}
		fmt.Fprintf(out, "%-10d %-10d %-7s %s\n", v.ActivityID, v.SKUID, v.Mode, rate)
	}
	return nil
}
