package discordtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// Interaction response types.
const (
	ResponseChannelMessage         = 4
	ResponseDeferredChannelMessage = 5
	ResponseDeferredUpdate         = 6
	ResponseUpdateMessage          = 7
)

// Interaction is a button press or a use of an application command, and
// how the bot answered it.
type Interaction struct {
	ID        string
	Token     string
	User      User
	ChannelID string
	// MessageID and CustomID are the pressed button's.
	MessageID string
	CustomID  string
	// Command and Options are the used command's name and string options.
	Command string
	Options map[string]string
	Created time.Time
	// ResponseType is the type of the accepted initial response, 0 while
	// unanswered; ResponseFlags its flags (64: ephemeral); Answered is
	// when it came.
	ResponseType  int
	ResponseFlags int
	Answered      time.Time
	// Refused counts initial responses refused: too late (after the ack
	// window: 10062 Unknown interaction) or a second one (40060).
	Refused int
}

// PressButton has user press the button with customID on a message the bot
// sent, and dispatches INTERACTION_CREATE. It fails if there is no such
// enabled button, as a real client offers none.
func (s *Server) PressButton(user User, channelID, messageID, customID string) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channelID, messageID)
	if m == nil || m.Author.ID != s.bot.ID {
		return Interaction{}, fmt.Errorf("discordtest: no bot message %s in channel %s", messageID, channelID)
	}
	found := slices.ContainsFunc(m.Components, func(r Row) bool {
		return slices.ContainsFunc(r.Components, func(b Button) bool { return b.CustomID == customID && !b.Disabled })
	})
	if !found {
		return Interaction{}, fmt.Errorf("discordtest: message %s has no enabled button %q", messageID, customID)
	}
	s.addUserLocked(user)
	now := time.Now()
	in := &Interaction{ID: s.nextIDLocked(now), Token: "aW50ZXJhY3Rpb24" + randomHex(24), User: user,
		ChannelID: channelID, MessageID: messageID, CustomID: customID, Created: now}
	s.interactions[in.ID] = in
	payload := map[string]any{
		"id": in.ID, "application_id": s.bot.ID, "type": 3, "token": in.Token, "version": 1,
		"channel_id": channelID, "locale": "en-US", "app_permissions": "0",
		"data":    map[string]any{"custom_id": customID, "component_type": 2},
		"message": m.wire(false, true),
	}
	if m.GuildID != "" {
		payload["guild_id"] = m.GuildID
		payload["member"] = map[string]any{"user": user.wire(), "roles": []string{}}
	} else {
		payload["user"] = user.wire()
	}
	s.dispatchLocked("INTERACTION_CREATE", 0, func(int) any { return payload })
	s.notifyLocked()
	return *in, nil
}

// Interaction returns the state of an interaction.
func (s *Server) Interaction(id string) (Interaction, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.interactions[id]
	if !ok {
		return Interaction{}, false
	}
	c := *in
	c.Options = maps.Clone(in.Options)
	return c, true
}

// Response returns the initial response to an interaction as a message
// (for a deferred one, with its later edits), if there is one.
func (s *Server) Response(interactionID string) (Sent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.originals[interactionID]
	if !ok {
		return Sent{}, false
	}
	return m.clone(), true
}

// interactionCallback takes the initial response to an interaction: once,
// within the ack window.
func (s *Server) interactionCallback(req *request) {
	var body struct {
		Type int `json:"type"`
		Data *struct {
			Content         *string         `json:"content"`
			Components      json.RawMessage `json:"components"`
			AllowedMentions json.RawMessage `json:"allowed_mentions"`
			Flags           int             `json:"flags"`
		} `json:"data"`
	}
	if err := json.Unmarshal(req.body, &body); err != nil {
		writeError(req.w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.interactions[req.args[0]]
	switch {
	case in == nil || in.Token != req.args[1]:
		writeError(req.w, http.StatusNotFound, 10062, "Unknown interaction")
		return
	case time.Since(in.Created) > s.ackWindow:
		in.Refused++
		s.notifyLocked()
		writeError(req.w, http.StatusNotFound, 10062, "Unknown interaction")
		return
	case in.ResponseType != 0:
		in.Refused++
		s.notifyLocked()
		writeError(req.w, http.StatusBadRequest, 40060, "Interaction has already been acknowledged.")
		return
	}
	flags := 0
	if body.Data != nil {
		flags = body.Data.Flags
	}
	switch body.Type {
	case ResponseDeferredUpdate, ResponseUpdateMessage:
		if in.Command != "" {
			// These answer a press on a message; a command has none.
			formError(req.w, "type", "INTERACTION_RESPONSE_TYPE_INVALID", "Interaction response type is invalid for this interaction")
			return
		}
	}
	switch body.Type {
	case ResponseDeferredUpdate:
	case ResponseDeferredChannelMessage:
		if flags&^(FlagSuppressEmbeds|FlagEphemeral) != 0 {
			formError(req.w, "data.flags", "MESSAGE_FLAGS_INVALID", "Invalid flags")
			return
		}
		now := time.Now()
		sent := &Sent{ID: s.nextIDLocked(now), ChannelID: in.ChannelID, Flags: flags, Interaction: in.ID,
			Ephemeral: flags&FlagEphemeral != 0, Deferred: true, Time: now}
		s.sent = append(s.sent, sent)
		s.originals[in.ID] = sent
	case ResponseUpdateMessage:
		edit := editBody{}
		if body.Data != nil {
			edit = editBody{Content: body.Data.Content, Components: body.Data.Components, AllowedMentions: body.Data.AllowedMentions}
		}
		m := s.findLocked(in.ChannelID, in.MessageID)
		if m == nil {
			writeError(req.w, http.StatusNotFound, 10008, "Unknown Message")
			return
		}
		if !s.applyEditLocked(req.w, m, edit, "interaction") {
			return
		}
	case ResponseChannelMessage:
		if body.Data == nil || body.Data.Content == nil {
			writeError(req.w, http.StatusBadRequest, 50006, "Cannot send an empty message")
			return
		}
		sent, ok := s.followupLocked(req.w, in, *body.Data.Content, body.Data.Flags, body.Data.AllowedMentions)
		if !ok {
			return
		}
		s.originals[in.ID] = sent
	default:
		formError(req.w, "type", "BASE_TYPE_CHOICES", "Value must be one of {4, 5, 6, 7}.")
		return
	}
	in.ResponseType, in.ResponseFlags, in.Answered = body.Type, flags, time.Now()
	s.notifyLocked()
	writeNoContent(req.w)
}

// followup serves follow-up messages of an answered interaction (the
// interaction token is their credential, valid 15 minutes).
func (s *Server) followup(req *request) {
	var body struct {
		Content         string          `json:"content"`
		Flags           int             `json:"flags"`
		AllowedMentions json.RawMessage `json:"allowed_mentions"`
	}
	if err := json.Unmarshal(req.body, &body); err != nil {
		writeError(req.w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var in *Interaction
	for _, x := range s.interactions {
		if x.Token == req.args[1] {
			in = x
		}
	}
	if req.args[0] != s.bot.ID || in == nil || in.ResponseType == 0 || time.Since(in.Created) > followupWindow {
		writeError(req.w, http.StatusNotFound, 10015, "Unknown Webhook")
		return
	}
	if _, ok := s.followupLocked(req.w, in, body.Content, body.Flags, body.AllowedMentions); ok {
		writeNoContent(req.w)
	}
}

// followupLocked posts a message answering an interaction; an ephemeral
// one is recorded but stays out of the channel's history.
func (s *Server) followupLocked(w http.ResponseWriter, in *Interaction, content string, flags int, allowed json.RawMessage) (*Sent, bool) {
	if !s.validMessage(w, content, nil, allowed, false) {
		return nil, false
	}
	now := time.Now()
	sent := &Sent{ChannelID: in.ChannelID, Content: content, Flags: flags, Interaction: in.ID,
		Ephemeral: flags&FlagEphemeral != 0, AllowedMentions: slices.Clone(allowed), Time: now}
	if sent.Ephemeral {
		sent.ID = s.nextIDLocked(now)
		s.sent = append(s.sent, sent)
		s.notifyLocked()
		return sent, true
	}
	m := &Message{ChannelID: in.ChannelID, Author: s.bot, Content: content, Flags: flags}
	posted := s.postBotLocked(s.channels[in.ChannelID], m, nil)
	posted.Interaction, posted.AllowedMentions = in.ID, sent.AllowedMentions
	return posted, true
}

// editOriginal edits the initial response to an interaction (the
// interaction token is the credential, valid 15 minutes). This is how a
// deferred response gets its content.
func (s *Server) editOriginal(req *request) {
	var body editBody
	if err := json.Unmarshal(req.body, &body); err != nil {
		writeError(req.w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var in *Interaction
	for _, x := range s.interactions {
		if x.Token == req.args[1] {
			in = x
		}
	}
	if req.args[0] != s.bot.ID || in == nil || time.Since(in.Created) > followupWindow {
		writeError(req.w, http.StatusNotFound, 10015, "Unknown Webhook")
		return
	}
	orig := s.originals[in.ID]
	if orig == nil {
		writeError(req.w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	content := orig.Text()
	if body.Content != nil {
		content = *body.Content
	}
	if !s.validMessage(req.w, content, nil, body.AllowedMentions, false) {
		return
	}
	orig.Edits = append(orig.Edits, Edit{Content: content, Flags: orig.Flags,
		AllowedMentions: slices.Clone(body.AllowedMentions), Via: "webhook"})
	m := s.findLocked(orig.ChannelID, orig.ID)
	if m != nil {
		m.Content = content
	} else {
		m = &Message{ID: orig.ID, ChannelID: orig.ChannelID, Author: s.bot, Content: content, Time: orig.Time, Flags: orig.Flags}
	}
	s.notifyLocked()
	writeJSON(req.w, http.StatusOK, m.wire(false, true))
}
