// Command floor is the bench's floor: a bare long-poll Telegram echo bot in
// Go, with nothing of latch's (no store, no pairing, no agent). What it
// costs in start-up, memory and reply time is what any Go bot on net/http
// and encoding/json costs, so bench prints latch's figures as ratios to it,
// measured in the same run.
//
// It reads the Bot API root from FLOOR_API_URL and the token from
// FLOOR_TOKEN, polls getUpdates (timeout 30 s) and answers each text
// message with "typing" (sendChatAction) and then the text itself
// (sendMessage), as latch answers: first request, then the reply.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type update struct {
	UpdateID int `json:"update_id"`
	Message  *struct {
		Chat struct {
			ID int64 `json:"id"`
		} `json:"chat"`
		Text string `json:"text"`
	} `json:"message"`
}

type bot struct {
	base string // API root + "/bot" + token
	http *http.Client
}

// call posts params as JSON to method and decodes the result into out.
func (b *bot) call(ctx context.Context, method string, params, out any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		Description string          `json:"description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if !env.OK {
		return fmt.Errorf("%s: %s", method, env.Description)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Result, out)
}

func run(ctx context.Context) error {
	b := &bot{base: os.Getenv("FLOOR_API_URL") + "/bot" + os.Getenv("FLOOR_TOKEN"), http: &http.Client{Timeout: time.Minute}}
	offset := 0
	for ctx.Err() == nil {
		var ups []update
		if err := b.call(ctx, "getUpdates", map[string]any{"offset": offset, "timeout": 30}, &ups); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintln(os.Stderr, "floor:", err)
			time.Sleep(time.Second)
			continue
		}
		for _, u := range ups {
			offset = u.UpdateID + 1
			if u.Message == nil || u.Message.Text == "" {
				continue
			}
			chat := u.Message.Chat.ID
			if err := b.call(ctx, "sendChatAction", map[string]any{"chat_id": chat, "action": "typing"}, nil); err != nil {
				fmt.Fprintln(os.Stderr, "floor:", err)
			}
			if err := b.call(ctx, "sendMessage", map[string]any{"chat_id": chat, "text": u.Message.Text}, nil); err != nil {
				fmt.Fprintln(os.Stderr, "floor:", err)
			}
		}
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}
