package discordtest

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

func (s *Server) getGateway(req *request) {
	writeJSON(req.w, http.StatusOK, map[string]string{"url": s.GatewayURL()})
}

func (s *Server) getGatewayBot(req *request) {
	writeJSON(req.w, http.StatusOK, map[string]any{
		"url": s.GatewayURL(), "shards": 1,
		"session_start_limit": map[string]int{"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1},
	})
}

func (s *Server) getMe(req *request) {
	writeJSON(req.w, http.StatusOK, s.bot.wire())
}

func (s *Server) openDM(req *request) {
	var body struct {
		RecipientID string `json:"recipient_id"`
	}
	if json.Unmarshal(req.body, &body) != nil || body.RecipientID == "" {
		formError(req.w, "recipient_id", "BASE_TYPE_REQUIRED", "This field is required")
		return
	}
	s.mu.Lock()
	u, ok := s.users[body.RecipientID]
	var ch *channel
	if ok {
		ch = s.dmLocked(u)
		s.notifyLocked()
	}
	s.mu.Unlock()
	if !ok {
		writeError(req.w, http.StatusNotFound, 10013, "Unknown User")
		return
	}
	writeJSON(req.w, http.StatusOK, map[string]any{"id": ch.id, "type": channelDM, "recipients": []wireUser{u.wire()}})
}

func (s *Server) typing(req *request) {
	s.mu.Lock()
	_, ok := s.channels[req.args[0]]
	s.mu.Unlock()
	if !ok {
		writeError(req.w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	writeNoContent(req.w)
}

// getMessages serves a channel's history the way Discord pages it: newest
// first, at most limit (default 50, at most 100) messages; with after, the
// limit messages right after that id; with before, those right before it.
func (s *Server) getMessages(req *request) {
	q := req.r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			formError(req.w, "limit", "NUMBER_TYPE_MAX", "int value should be less than or equal to 100.")
			return
		}
		limit = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[req.args[0]]
	if ch == nil {
		writeError(req.w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	var pick []*Message
	switch after, before := q.Get("after"), q.Get("before"); {
	case after != "":
		for _, m := range ch.msgs {
			if idLess(after, m.ID) && len(pick) < limit {
				pick = append(pick, m)
			}
		}
	case before != "":
		for _, m := range ch.msgs {
			if idLess(m.ID, before) {
				pick = append(pick, m)
			}
		}
		pick = pick[max(0, len(pick)-limit):]
	default:
		pick = ch.msgs[max(0, len(ch.msgs)-limit):]
	}
	out := make([]wireMessage, 0, len(pick))
	for i := len(pick) - 1; i >= 0; i-- {
		out = append(out, pick[i].wire(false, s.contentVisible(pick[i], s.gw.privileged)))
	}
	writeJSON(req.w, http.StatusOK, out)
}

func (s *Server) getMessage(req *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(req.args[0], req.args[1])
	if m == nil {
		writeError(req.w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	writeJSON(req.w, http.StatusOK, m.wire(false, s.contentVisible(m, s.gw.privileged)))
}

// createBody is what the bot sends to create a message.
type createBody struct {
	Content          *string         `json:"content"`
	AllowedMentions  json.RawMessage `json:"allowed_mentions"`
	Components       []Row           `json:"components"`
	Flags            int             `json:"flags"`
	MessageReference *struct {
		MessageID       string `json:"message_id"`
		FailIfNotExists *bool  `json:"fail_if_not_exists"`
	} `json:"message_reference"`
}

func (s *Server) createMessage(req *request) {
	var body createBody
	var files []File
	raw := req.body
	if req.r.MultipartForm != nil {
		raw = []byte(req.r.FormValue("payload_json"))
		var err error
		if files, err = uploads(req.r); err != nil {
			writeError(req.w, http.StatusBadRequest, 50035, "Invalid Form Body")
			return
		}
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		writeError(req.w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	content := ""
	if body.Content != nil {
		content = *body.Content
	}
	if !s.validMessage(req.w, content, body.Components, body.AllowedMentions, len(files) > 0) {
		return
	}
	if body.Flags&^(FlagSuppressEmbeds|1<<12) != 0 {
		formError(req.w, "flags", "MESSAGE_FLAGS_INVALID", "Invalid flags")
		return
	}
	largest := 0
	for _, f := range files {
		largest = max(largest, len(f.Data))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[req.args[0]]
	switch {
	case ch == nil:
		writeError(req.w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	case largest > s.maxUpload:
		// Discord's limit is per file; the whole request is bounded only
		// by maxUploadBody.
		writeError(req.w, http.StatusRequestEntityTooLarge, 40005, "Request entity too large")
		return
	}
	m := &Message{ChannelID: ch.id, GuildID: ch.guildID, Author: s.bot, Content: content,
		Components: body.Components, Flags: body.Flags}
	if ref := body.MessageReference; ref != nil {
		if s.findLocked(ch.id, ref.MessageID) != nil {
			m.ReplyTo, m.Type = ref.MessageID, MessageReply
		} else if ref.FailIfNotExists == nil || *ref.FailIfNotExists {
			formError(req.w, "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
			return
		}
	}
	sent := s.postBotLocked(ch, m, files)
	sent.AllowedMentions = slices.Clone(body.AllowedMentions)
	writeJSON(req.w, http.StatusOK, m.wire(false, true))
}

// postBotLocked adds a message of the bot to a channel, records it as sent
// and dispatches it (the bot receives its own messages too).
func (s *Server) postBotLocked(ch *channel, m *Message, files []File) *Sent {
	now := time.Now()
	m.ID, m.Time = s.nextIDLocked(now), now
	for _, f := range files {
		m.Attachments = append(m.Attachments, s.storeFileLocked(ch.id, f, now))
	}
	ch.msgs = append(ch.msgs, m)
	sent := &Sent{ID: m.ID, ChannelID: ch.id, Content: m.Content, Flags: m.Flags,
		Components: cloneRows(m.Components), Files: files, ReplyTo: m.ReplyTo, Time: now}
	s.sent = append(s.sent, sent)
	s.sentIndex[m.ID] = sent
	s.dispatchMessageLocked(m)
	s.notifyLocked()
	return sent
}

// validMessage checks content, components and allowed_mentions as Discord
// does, answering 400 if they are not valid.
func (s *Server) validMessage(w http.ResponseWriter, content string, rows []Row, allowed json.RawMessage, files bool) bool {
	if n := utf8.RuneCountInString(content); n > MaxContent {
		formError(w, "content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
		return false
	}
	if content == "" && len(rows) == 0 && !files {
		writeError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return false
	}
	if !validRows(rows) {
		formError(w, "components", "COMPONENT_INVALID", "Invalid component")
		return false
	}
	if len(allowed) > 0 && string(allowed) != "null" {
		var am struct {
			Parse []string `json:"parse"`
		}
		if json.Unmarshal(allowed, &am) != nil {
			formError(w, "allowed_mentions", "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
			return false
		}
		for _, p := range am.Parse {
			if p != "users" && p != "roles" && p != "everyone" {
				formError(w, "allowed_mentions", "ENUM_TYPE_COERCE", "Value must be one of {'users', 'roles', 'everyone'}.")
				return false
			}
		}
	}
	return true
}

// validRows checks action rows of buttons: at most 5 rows of 1-5 buttons,
// each with a style and a custom_id of 1-100 characters (or a URL).
func validRows(rows []Row) bool {
	if len(rows) > 5 {
		return false
	}
	for _, r := range rows {
		if r.Type != 1 || len(r.Components) == 0 || len(r.Components) > 5 {
			return false
		}
		for _, b := range r.Components {
			link := b.Style == 5
			switch {
			case b.Type != 2, b.Style < 1 || b.Style > 5:
				return false
			case link && b.URL == "", !link && (b.CustomID == "" || utf8.RuneCountInString(b.CustomID) > maxCustomID):
				return false
			}
		}
	}
	return true
}

// uploads reads the files[n] parts of a multipart message.
func uploads(r *http.Request) ([]File, error) {
	var out []File
	for i := 0; ; i++ {
		fhs := r.MultipartForm.File["files["+strconv.Itoa(i)+"]"]
		if len(fhs) == 0 {
			return out, nil
		}
		f, err := fhs[0].Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: fhs[0].Filename, ContentType: fhs[0].Header.Get("Content-Type"), Data: data})
	}
}

// editBody is a message edit: absent fields stay as they are.
type editBody struct {
	Content         *string         `json:"content"`
	Components      json.RawMessage `json:"components"`
	AllowedMentions json.RawMessage `json:"allowed_mentions"`
	Flags           *int            `json:"flags"`
}

// editMessage edits a message of the bot, within the edit rate model.
func (s *Server) editMessage(req *request) {
	var body editBody
	if err := json.Unmarshal(req.body, &body); err != nil {
		writeError(req.w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	s.mu.Lock()
	// Discord applies its rate limits before it looks at the request.
	if wait := s.admitEditLocked(req.w.Header(), req.args[0], s.editClock()); wait > 0 {
		s.mu.Unlock()
		s.writeRateLimited(req.w, Fault{RetryAfter: wait})
		return
	}
	defer s.mu.Unlock()
	m := s.findLocked(req.args[0], req.args[1])
	switch {
	case m == nil:
		writeError(req.w, http.StatusNotFound, 10008, "Unknown Message")
		return
	case m.Author.ID != s.bot.ID:
		writeError(req.w, http.StatusForbidden, 50005, "Cannot edit a message authored by another user")
		return
	}
	if !s.applyEditLocked(req.w, m, body, "patch") {
		return
	}
	writeJSON(req.w, http.StatusOK, m.wire(false, true))
}

// applyEditLocked validates and applies an edit to a bot message, recording
// it on the sent message. Of the flags only SUPPRESS_EMBEDS can be changed.
func (s *Server) applyEditLocked(w http.ResponseWriter, m *Message, body editBody, via string) bool {
	content, rows, flags := m.Content, m.Components, m.Flags
	if body.Content != nil {
		content = *body.Content
	}
	if len(body.Components) > 0 && string(body.Components) != "null" {
		rows = nil
		if err := json.Unmarshal(body.Components, &rows); err != nil {
			formError(w, "components", "MODEL_TYPE_CONVERT", "Only iterables may be used in a ListType")
			return false
		}
	}
	if body.Flags != nil {
		if *body.Flags&^FlagSuppressEmbeds != 0 {
			formError(w, "flags", "MESSAGE_FLAGS_INVALID", "Invalid flags")
			return false
		}
		flags = flags&^FlagSuppressEmbeds | *body.Flags
	}
	if !s.validMessage(w, content, rows, body.AllowedMentions, len(m.Attachments) > 0) {
		return false
	}
	m.Content, m.Components, m.Flags = content, rows, flags
	if sent := s.sentIndex[m.ID]; sent != nil {
		sent.Edits = append(sent.Edits, Edit{Content: content, Components: cloneRows(rows), Flags: flags,
			AllowedMentions: slices.Clone(body.AllowedMentions), Via: via})
	}
	s.notifyLocked()
	return true
}

// deleteMessage deletes a message of the bot.
func (s *Server) deleteMessage(req *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[req.args[0]]
	m := s.findLocked(req.args[0], req.args[1])
	switch {
	case m == nil:
		writeError(req.w, http.StatusNotFound, 10008, "Unknown Message")
		return
	case m.Author.ID != s.bot.ID:
		// A bot may delete others' messages only with Manage Messages,
		// which the fake never grants.
		writeError(req.w, http.StatusForbidden, 50013, "Missing Permissions")
		return
	}
	ch.msgs = slices.DeleteFunc(ch.msgs, func(x *Message) bool { return x == m })
	if sent := s.sentIndex[m.ID]; sent != nil {
		sent.Deleted = true
	}
	s.notifyLocked()
	writeNoContent(req.w)
}
