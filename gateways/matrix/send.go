package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/markdown"
	"github.com/latchd/latch/gateways/telegram/tgmd"
	"github.com/latchd/latch/turn"
)

// maxChunk bounds one message's formatted_body in bytes. An event is at
// most 65,536 bytes (https://spec.matrix.org/v1.11/client-server-api/#size-limits)
// and carries body and formatted_body, and an edit both twice: 12 KiB
// each leaves room for the envelope and Megolm's base64.
const maxChunk = 12 << 10

// htmlFormat is formatted_body's format.
const htmlFormat = "org.matrix.custom.html"

// rendered is one message: its HTML and its plain text.
type rendered struct{ html, plain string }

// render cuts a reply into messages: the Hub's Markdown as Matrix HTML,
// plain text escaped, Pre as a code block.
func render(r adapter.Reply) []rendered {
	switch {
	case r.Markdown:
		return renderMarkdown(r.Text)
	case r.Pre:
		var out []rendered
		for _, c := range chunkHTML(html.EscapeString(r.Text)) {
			out = append(out, rendered{html: "<pre><code>" + c + "</code></pre>", plain: markdown.VisibleHTML(c)})
		}
		return out
	}
	return renderPlain(r.Text)
}

// renderMarkdown is model or Hub Markdown as Matrix HTML: the Telegram
// renderer's small dialect (b, i, s, code, pre, a, blockquote; raw HTML
// escaped, links only of safe schemes), which is a subset of Matrix's,
// with its line breaks as <br>.
func renderMarkdown(src string) []rendered {
	var out []rendered
	for _, c := range chunkHTML(tgmd.Render(src)) {
		if strings.TrimSpace(c) == "" {
			continue
		}
		out = append(out, rendered{html: matrixHTML(c), plain: markdown.VisibleHTML(c)})
	}
	return out
}

func renderPlain(text string) []rendered {
	var out []rendered
	for _, c := range chunkHTML(html.EscapeString(text)) {
		if strings.TrimSpace(c) != "" {
			out = append(out, rendered{plain: markdown.VisibleHTML(c)})
		}
	}
	if len(out) == 0 {
		out = append(out, rendered{plain: text})
	}
	return out
}

// chunkHTML cuts HTML into pieces whose largest event — an edit, which
// carries body and formatted_body twice, JSON-escaped and in an encrypted
// room base64'd by Megolm — fits maxEvent: a piece that does not is cut
// again, finer.
func chunkHTML(s string) []string { return chunkFit(s, maxChunk) }

func chunkFit(s string, limit int) []string {
	var out []string
	for _, c := range markdown.ChunkHTML(s, limit, func(s string) int { return len(s) }) {
		if limit <= markdown.MinLimit || eventSize(c) <= maxEvent {
			out = append(out, c)
			continue
		}
		out = append(out, chunkFit(c, limit/2)...)
	}
	return out
}

// maxEvent is what latch lets an event's content take: the 65,536 bytes
// of a whole event less room for its envelope and Megolm's framing.
const maxEvent = 60 << 10

// eventSize is the size an edit of c takes at most, encrypted.
func eventSize(c string) int {
	r := rendered{html: matrixHTML(c), plain: markdown.VisibleHTML(c)}
	b, _ := json.Marshal(editContent("$0123456789abcdefghijklmnopqrstuvwxyz0123456", string(event.MsgText), r))
	return len(b)*4/3 + 512
}

// matrixHTML turns Telegram-dialect HTML into Matrix's: a line break is
// <br> but inside <pre>, and <s> is <del>.
func matrixHTML(s string) string {
	var b strings.Builder
	pre := 0
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "<pre"):
			pre++
		case strings.HasPrefix(s[i:], "</pre>"):
			pre = max(pre-1, 0)
		case strings.HasPrefix(s[i:], "<s>"):
			b.WriteString("<del>")
			i += 2
			continue
		case strings.HasPrefix(s[i:], "</s>"):
			b.WriteString("</del>")
			i += 3
			continue
		case s[i] == '\n' && pre == 0:
			b.WriteString("<br>")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// messageContent is an m.room.message's content. m.mentions is always
// there and empty, so that nothing in latch's text pings anyone.
func messageContent(msgType string, r rendered) map[string]any {
	c := map[string]any{"msgtype": msgType, "body": r.plain, "m.mentions": map[string]any{}}
	if r.html != "" {
		c["format"], c["formatted_body"] = htmlFormat, r.html
	}
	return c
}

// editContent replaces target's content with r (m.replace).
func editContent(target id.EventID, msgType string, r rendered) map[string]any {
	c := messageContent(msgType, rendered{plain: "* " + r.plain})
	if r.html != "" {
		c["format"], c["formatted_body"] = htmlFormat, "* "+r.html
	}
	c["m.new_content"] = messageContent(msgType, r)
	c["m.relates_to"] = map[string]any{"rel_type": string(event.RelReplace), "event_id": string(target)}
	return c
}

// Send posts a reply as m.text messages (the last with its buttons as
// reactions to press) and returns the last one's event ID.
func (g *Gateway) Send(ctx context.Context, chat string, r adapter.Reply) (string, error) {
	rid, err := roomOf(chat)
	if err != nil {
		return "", err
	}
	if r.Paired {
		g.markOwner(rid)
	}
	parts := render(r)
	if len(r.Buttons) > 0 {
		last := &parts[len(parts)-1]
		hint := buttonHint(r.Buttons)
		last.plain += "\n" + hint
		if last.html != "" {
			last.html += "<br>" + html.EscapeString(hint)
		}
	}
	var evID id.EventID
	for _, p := range parts {
		if evID, err = g.post(ctx, rid, messageContent(string(event.MsgText), p)); err != nil {
			return "", err
		}
	}
	if len(r.Buttons) > 0 {
		g.rememberButtons(rid, evID, parts[len(parts)-1], r.Buttons)
	}
	return string(evID), nil
}

// emoji is the reaction that presses a button of a kind.
func emoji(data string) string {
	k, _, _ := turn.ParsePayload(data)
	switch k {
	case turn.KindApprove, turn.KindLatchOK:
		return "✅"
	case turn.KindDeny, turn.KindLatchNo:
		return "❌"
	case turn.KindAlways:
		return "🔁"
	}
	return ""
}

// buttonHint says which reaction presses which button.
func buttonHint(buttons []adapter.Button) string {
	var parts []string
	for _, b := range buttons {
		if e := emoji(b.Data); e != "" {
			parts = append(parts, e+" "+turn.Clip(b.Label, 40))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "React with " + strings.Join(parts, " · ")
}

// rememberButtons keeps a message with buttons, for a reaction to press
// one and AnswerCallback to show the outcome under it.
func (g *Gateway) rememberButtons(rid id.RoomID, ev id.EventID, shown rendered, buttons []adapter.Button) {
	m := approvalMsg{room: rid, text: shown.html, plain: shown.plain, payload: map[string]string{}}
	for _, b := range buttons {
		if e := emoji(b.Data); e != "" {
			m.payload[e] = b.Data
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.buttons) >= maxButtons {
		clear(g.buttons)
	}
	g.buttons[ev] = m
}

// post sends an event to a room, encrypted if the room is; the
// transaction ID is kept across tries, so a homeserver that took the
// event before a failure does not show it twice.
func (g *Gateway) post(ctx context.Context, rid id.RoomID, c map[string]any) (id.EventID, error) {
	return g.postType(ctx, rid, event.EventMessage, c)
}

func (g *Gateway) postType(ctx context.Context, rid id.RoomID, typ event.Type, c map[string]any) (id.EventID, error) {
	enc, err := g.encrypted(ctx, rid)
	if err != nil {
		return "", err
	}
	var body any = c
	if enc {
		e := g.crypto()
		if e == nil {
			return "", adapter.Rejected(errors.New("matrix: the room is encrypted and latch has no end-to-end encryption here"))
		}
		if body, err = e.encrypt(ctx, rid, typ, c); err != nil {
			return "", g.classify(err)
		}
		typ = event.EventEncrypted
	}
	txn := g.cli.TxnID()
	var resp *mautrix.RespSendEvent
	err = g.call(ctx, func(ctx context.Context) (err error) {
		resp, err = g.cli.SendMessageEvent(ctx, rid, typ, body, mautrix.ReqSendEvent{TransactionID: txn})
		return err
	})
	if err != nil {
		return "", err
	}
	return resp.EventID, nil
}

// encrypted reports whether rid is an encrypted room: from the sync, else
// from its m.room.encryption state (once per room).
func (g *Gateway) encrypted(ctx context.Context, rid id.RoomID) (bool, error) {
	g.mu.Lock()
	r := g.roomLocked(rid)
	enc, known := r.encrypted, r.encKnown
	g.mu.Unlock()
	if enc || known {
		return enc, nil
	}
	var c struct {
		Algorithm string `json:"algorithm"`
	}
	err := g.call(ctx, func(ctx context.Context) error {
		return g.cli.StateEvent(ctx, rid, event.StateEncryption, "", &c)
	})
	var he mautrix.HTTPError
	switch {
	case err == nil:
		enc = c.Algorithm != ""
	case errors.As(err, &he) && he.RespError != nil && he.RespError.ErrCode == mautrix.MNotFound.ErrCode:
		enc = false
	default:
		return false, err
	}
	g.mu.Lock()
	r = g.roomLocked(rid)
	r.encrypted, r.encKnown = r.encrypted || enc, true
	enc = r.encrypted
	g.mu.Unlock()
	return enc, nil
}

// edit replaces an event's content.
func (g *Gateway) edit(ctx context.Context, rid id.RoomID, target id.EventID, r rendered) error {
	_, err := g.post(ctx, rid, editContent(target, string(event.MsgText), r))
	return err
}

// AnswerCallback answers a press: with resolved, the message with the
// buttons is edited to show it under its text (and its reactions no
// longer press); else the notice is sent as an m.notice.
func (g *Gateway) AnswerCallback(ctx context.Context, chat string, cb adapter.Callback, notice, resolved string) error {
	rid, err := roomOf(chat)
	if err != nil {
		return err
	}
	if resolved != "" && cb.MessageID != "" {
		g.mu.Lock()
		m, ok := g.buttons[id.EventID(cb.MessageID)]
		delete(g.buttons, id.EventID(cb.MessageID))
		g.mu.Unlock()
		if !ok || m.room != rid {
			m = approvalMsg{plain: "🔐"}
		}
		r := rendered{plain: m.plain + "\n" + resolved}
		if m.text != "" {
			r.html = m.text + "<br>" + html.EscapeString(resolved)
		}
		return g.edit(ctx, rid, id.EventID(cb.MessageID), r)
	}
	if notice == "" {
		return nil
	}
	_, err = g.post(ctx, rid, messageContent(string(event.MsgNotice), rendered{plain: notice}))
	return err
}

// typing shows "typing…" in a room for a while. It is tried once: a
// homeserver rate-limits typing (Dendrite does) and a missed one only
// shows less.
func (g *Gateway) typing(ctx context.Context, rid id.RoomID, on bool) error {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	_, err := g.cli.UserTyping(ctx, rid, on, typingFor)
	if _, limited := rateLimited(err); limited {
		return nil
	}
	return g.classify(err)
}
