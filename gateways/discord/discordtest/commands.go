package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"
)

// Interaction context types: where a command may be used.
const (
	ContextGuild          = 0
	ContextBotDM          = 1
	ContextPrivateChannel = 2
)

// Command is a registered application command (a slash command), as the
// bot sent it and the fake stored it.
type Command struct {
	ID            string `json:"id,omitempty"`
	ApplicationID string `json:"application_id,omitempty"`
	Version       string `json:"version,omitempty"`
	Type          int    `json:"type,omitempty"`
	Name          string `json:"name"`
	Description   string `json:"description"`
	// Contexts are where the command may be used (Context* constants); nil
	// when the bot left them to Discord's default (servers and bot DMs).
	Contexts []int `json:"contexts,omitempty"`
	// IntegrationTypes are the installations the command comes with: 0
	// installed to a server, 1 to a user.
	IntegrationTypes []int           `json:"integration_types,omitempty"`
	Options          []CommandOption `json:"options"`
}

// CommandOption is an option of a chat command.
type CommandOption struct {
	Type        int    `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required,omitempty"`
	MaxLength   int    `json:"max_length,omitempty"`
}

// Option types the fake knows.
const (
	OptionString = 3
)

var commandName = regexp.MustCompile(`^[-_\p{Ll}\p{N}]{1,32}$`)

// Commands returns the global commands the bot registered last.
func (s *Server) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.commands)
	for i := range out {
		out[i].Contexts = slices.Clone(out[i].Contexts)
		out[i].IntegrationTypes = slices.Clone(out[i].IntegrationTypes)
		out[i].Options = slices.Clone(out[i].Options)
	}
	return out
}

// putCommands replaces the application's global commands (bulk
// overwrite). A command keeps its id across overwrites, as on Discord.
func (s *Server) putCommands(req *request) {
	if req.args[0] != s.bot.ID {
		writeError(req.w, http.StatusForbidden, 50001, "Missing Access")
		return
	}
	var cmds []Command
	if err := json.Unmarshal(req.body, &cmds); err != nil {
		writeError(req.w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	if field, ok := validCommands(cmds); !ok {
		formError(req.w, field, "INVALID_COMMAND", "Invalid application command")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for i := range cmds {
		c := &cmds[i]
		if c.Type == 0 {
			c.Type = 1
		}
		c.ID, c.ApplicationID, c.Version = s.nextIDLocked(now), s.bot.ID, s.nextIDLocked(now)
		for _, old := range s.commands {
			if old.Name == c.Name {
				c.ID = old.ID
			}
		}
		if c.Options == nil {
			c.Options = []CommandOption{}
		}
	}
	s.commands = cmds
	s.notifyLocked()
	writeJSON(req.w, http.StatusOK, cmds)
}

// validCommands checks commands as Discord does for chat commands, and
// returns the offending field if one is not valid.
func validCommands(cmds []Command) (string, bool) {
	seen := map[string]bool{}
	for i, c := range cmds {
		at := fmt.Sprintf("%d.", i)
		switch {
		case c.Type != 0 && c.Type != 1:
			return at + "type", false
		case !commandName.MatchString(c.Name) || seen[c.Name]:
			return at + "name", false
		case c.Description == "" || utf8.RuneCountInString(c.Description) > 100:
			return at + "description", false
		case len(c.Options) > 25:
			return at + "options", false
		}
		seen[c.Name] = true
		for _, x := range c.Contexts {
			if x < ContextGuild || x > ContextPrivateChannel {
				return at + "contexts", false
			}
		}
		for _, x := range c.IntegrationTypes {
			if x != 0 && x != 1 {
				return at + "integration_types", false
			}
		}
		optional := false
		for j, o := range c.Options {
			field := fmt.Sprintf("%soptions.%d.", at, j)
			switch {
			case o.Type < 1 || o.Type > 11:
				return field + "type", false
			case !commandName.MatchString(o.Name):
				return field + "name", false
			case o.Description == "" || utf8.RuneCountInString(o.Description) > 100:
				return field + "description", false
			case o.Required && optional:
				return field + "required", false // required options come first
			case o.MaxLength < 0 || o.MaxLength > 6000:
				return field + "max_length", false
			}
			optional = optional || !o.Required
		}
	}
	return "", true
}

// CommandUse is a use of an application command.
type CommandUse struct {
	User User
	Name string
	// Options are the string options given, by name.
	Options map[string]string
	// GuildID and ChannelID place the use in a server's text channel
	// (created on first use); empty, the command is used in the user's DM
	// with the bot.
	GuildID, ChannelID string
	// Unchecked skips what Discord and its clients check — that the
	// command is registered, may be used there and gets its required
	// options — to see what the bot itself accepts.
	Unchecked bool
}

// InvokeCommand has a user use an application command and dispatches
// INTERACTION_CREATE (type 2, APPLICATION_COMMAND). Unless Unchecked, it
// fails as a real client would not offer the command: not registered, not
// usable in that context, a required option missing or too long.
func (s *Server) InvokeCommand(use CommandUse) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addUserLocked(use.User)
	var ch *channel
	ctx := ContextBotDM
	if use.ChannelID == "" && use.GuildID == "" {
		ch = s.dmLocked(use.User)
	} else {
		if use.ChannelID == "" {
			use.ChannelID = "800000000000000001"
		}
		ch, ctx = s.guildChannelLocked(use.GuildID, use.ChannelID), ContextGuild
	}
	var cmd Command
	if i := slices.IndexFunc(s.commands, func(c Command) bool { return c.Name == use.Name }); i >= 0 {
		cmd = s.commands[i]
	} else if !use.Unchecked {
		return Interaction{}, fmt.Errorf("discordtest: no registered command %q", use.Name)
	}
	if !use.Unchecked {
		if err := usable(cmd, ctx, use.Options); err != nil {
			return Interaction{}, err
		}
	}
	var opts []map[string]any
	for _, o := range cmd.Options {
		if v, ok := use.Options[o.Name]; ok {
			opts = append(opts, map[string]any{"name": o.Name, "type": o.Type, "value": v})
		}
	}
	if cmd.Name == "" { // unchecked and unregistered: pass the options as strings
		for name, v := range use.Options {
			opts = append(opts, map[string]any{"name": name, "type": OptionString, "value": v})
		}
	}
	now := time.Now()
	in := &Interaction{ID: s.nextIDLocked(now), Token: "aW50ZXJhY3Rpb24" + randomHex(24), User: use.User,
		ChannelID: ch.id, Command: use.Name, Options: use.Options, Created: now}
	s.interactions[in.ID] = in
	payload := map[string]any{
		"id": in.ID, "application_id": s.bot.ID, "type": 2, "token": in.Token, "version": 1,
		"channel_id": ch.id, "channel": map[string]any{"id": ch.id, "type": ch.kind},
		"context": ctx, "locale": "en-US", "app_permissions": "0",
		"data": map[string]any{"id": cmd.ID, "name": use.Name, "type": 1, "options": opts},
	}
	if ch.guildID != "" {
		payload["guild_id"] = ch.guildID
		payload["member"] = map[string]any{"user": use.User.wire(), "roles": []string{}}
	} else {
		payload["user"] = use.User.wire()
	}
	s.dispatchLocked("INTERACTION_CREATE", 0, func(int) any { return payload })
	s.notifyLocked()
	return *in, nil
}

// usable checks a use of cmd as Discord's client and API do.
func usable(cmd Command, ctx int, options map[string]string) error {
	if cmd.Contexts != nil && !slices.Contains(cmd.Contexts, ctx) {
		return fmt.Errorf("discordtest: command %q cannot be used in context %d", cmd.Name, ctx)
	}
	for name := range options {
		if !slices.ContainsFunc(cmd.Options, func(o CommandOption) bool { return o.Name == name }) {
			return fmt.Errorf("discordtest: command %q has no option %q", cmd.Name, name)
		}
	}
	for _, o := range cmd.Options {
		v, ok := options[o.Name]
		switch {
		case o.Required && !ok:
			return fmt.Errorf("discordtest: command %q needs option %q", cmd.Name, o.Name)
		case ok && o.MaxLength > 0 && utf8.RuneCountInString(v) > o.MaxLength:
			return fmt.Errorf("discordtest: option %q takes at most %d characters", o.Name, o.MaxLength)
		}
	}
	return nil
}
