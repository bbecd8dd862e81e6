package benchkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Admin calls a seckill process' admin API at Addr with Token.
type Admin struct {
	Addr, Token string
	HTTP        *http.Client
}

// Call sends in (JSON, if not nil) to method path and decodes the answer
// into out (if not nil); an answer other than 200 is an error.
func (a Admin) Call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+a.Addr+path, body)
	req.Header.Set("Authorization", "Bearer "+a.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Buy sends one purchase of sku as user to the order URL and returns the
// status and requestNo.
func Buy(c *http.Client, orderURL string, sku, user int64) (int, string, error) {
	req, _ := http.NewRequest("POST", orderURL, strings.NewReader(`{"skuId":`+strconv.FormatInt(sku, 10)+`,"quantity":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-Id", strconv.FormatInt(user, 10))
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body struct {
		RequestNo string `json:"requestNo"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.RequestNo, nil
}
