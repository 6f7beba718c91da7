package discord

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/logkey"
)

// The /pair application command: Discord's own way to send latch a
// pairing code from a DM with the bot. A use of it becomes the same
// adapter.Message "/pair CODE" typed as text would, so the Hub's guard and
// the pairing package handle both alike; the adapter only translates. The
// command's option value is never logged.
const (
	pairCommand = "pair"
	pairOption  = "code"
	// maxPairOption bounds the option in Discord's client; a code is
	// eight symbols, typed with spaces or a hyphen at most.
	maxPairOption = 64
	// registerTimeout bounds registering the command at start, 429s
	// waited out included.
	registerTimeout = 15 * time.Second
	// pairAnswerWait is how long a /pair waits for the Hub's reply to
	// become its response: Discord takes the initial response within 3 s
	// of the use, and the request needs some of that.
	pairAnswerWait = 2500 * time.Millisecond
	// maxPendingPairs bounds the /pair uses waiting for their reply.
	maxPendingPairs = 64
)

// responseChannelMessage is the interaction response that answers with a
// message.
const responseChannelMessage = 4

// pendingPair is a /pair waiting for the Hub's reply to become its
// response. There is no acknowledgement before it: the adapter cannot
// know whether the Hub will answer — a latched gateway answers a stranger's
// /pair with silence, as it does a typed one — and an acknowledgement
// ("thinking…") would be an answer. A use that gets no reply in time is
// left unanswered; Discord's client then says the application did not
// respond, as it would for a bot that is off.
type pendingPair struct {
	in     *discordgo.Interaction // id, application id, token
	chatID string
	due    time.Time // then it is forgotten, unanswered
}

// commandResponse is the initial response to a command: only the fields
// latch sets, so that nothing discordgo's larger type carries is sent.
type commandResponse struct {
	Type int                 `json:"type"`
	Data commandResponseData `json:"data"`
}

type commandResponseData struct {
	Content         string                            `json:"content,omitempty"`
	Flags           discordgo.MessageFlags            `json:"flags"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions,omitempty"`
}

// pairCommandSpec is the /pair command: a chat command with one required
// string option, usable only in a DM with the bot (the BOT_DM context) of
// the bot installed to a server, which is how a user comes to share a
// server with it and so can DM it at all.
func pairCommandSpec() *discordgo.ApplicationCommand {
	contexts := []discordgo.InteractionContextType{discordgo.InteractionContextBotDM}
	installs := []discordgo.ApplicationIntegrationType{discordgo.ApplicationIntegrationGuildInstall}
	minLen := 1
	return &discordgo.ApplicationCommand{
		Type:             discordgo.ChatApplicationCommand,
		Name:             pairCommand,
		Description:      "Pair this chat with latch using a code from `latch pair discord` on the machine",
		Contexts:         &contexts,
		IntegrationTypes: &installs,
		Options: []*discordgo.ApplicationCommandOption{{
			Type:        discordgo.ApplicationCommandOptionString,
			Name:        pairOption,
			Description: "The pairing code the machine showed",
			Required:    true,
			MinLength:   &minLen,
			MaxLength:   maxPairOption,
		}},
	}
}

// registerCommands makes /pair the application's only global command
// (a bulk overwrite: the same request every start, which Discord treats as
// no change). A failure is logged: pairing by text works without it.
func (g *Gateway) registerCommands(ctx context.Context, s *discordgo.Session) {
	g.mu.Lock()
	app := g.appID
	g.mu.Unlock()
	if app == "" {
		g.log.Warn("READY named no application; the /pair command is not registered (\"/pair CODE\" as text still works)")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	cmds := []*discordgo.ApplicationCommand{pairCommandSpec()}
	err := g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) error {
		_, err := s.ApplicationCommandBulkOverwrite(app, "", cmds, opts...)
		return err
	})
	if err != nil {
		g.log.Warn("registering the /pair command failed; \"/pair CODE\" as text still works", logkey.Err, err)
		return
	}
	g.log.Debug("registered the /pair command")
}

// translateCommand turns a use of /pair in a DM with the bot into the
// message "/pair CODE" from that DM, and holds the interaction for the
// Hub's reply (holdPair). Any other command, and /pair anywhere else, is
// dropped without an answer, as a stranger's message is.
func (g *Gateway) translateCommand(i *discordgo.Interaction) (adapter.Message, bool) {
	data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	user := i.User
	switch {
	case !ok || data.Name != pairCommand || data.CommandType > discordgo.ChatApplicationCommand:
		g.log.Debug("skipping an application command latch does not have")
		return adapter.Message{}, false
	case user == nil || user.Bot || i.ID == "" || i.Token == "" || i.ChannelID == "":
		g.log.Debug("skipping an incomplete /pair")
		return adapter.Message{}, false
	case i.GuildID != "" || i.Member != nil || i.Context != discordgo.InteractionContextBotDM:
		// Registered for DMs with the bot only: a server's channel, a group
		// DM or someone else's DM is not a chat to pair from here.
		g.log.Debug("skipping a /pair used outside a DM with the bot")
		return adapter.Message{}, false
	}
	var code string
	for _, o := range data.Options {
		if o != nil && o.Name == pairOption {
			code, _ = o.Value.(string)
		}
	}
	if utf8.RuneCountInString(code) > maxInbound {
		g.log.Warn("skipping an oversized /pair")
		return adapter.Message{}, false
	}
	g.holdPair(i)
	return adapter.Message{
		Gateway:  gatewayName,
		ID:       i.ID, // the Hub's reply goes to this id: Send routes it here
		ChatID:   i.ChannelID,
		ChatType: adapter.ChatPrivate,
		ChatName: displayName(user),
		UserID:   user.ID,
		UserName: user.Username,
		Text:     "/pair " + strings.TrimSpace(code),
		Time:     snowflakeTime(i.ID).UTC(),
	}, true
}

// holdPair keeps a /pair's interaction so that the Hub's reply, if one
// comes within pairAnswerWait, becomes its ephemeral response (Send routes
// it). With too many waiting already, the use stays unanswered and a
// reply goes to the chat as a message.
func (g *Gateway) holdPair(i *discordgo.Interaction) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pairs) >= maxPendingPairs {
		return
	}
	g.pairs[i.ID] = &pendingPair{in: &discordgo.Interaction{ID: i.ID, AppID: i.AppID, Token: i.Token},
		chatID: i.ChannelID, due: time.Now().Add(g.pairWait)}
}

// takePair returns and forgets the /pair waiting for a reply to replyTo in
// a channel, if there is one.
func (g *Gateway) takePair(chatID, replyTo string) *pendingPair {
	if replyTo == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.pairs[replyTo]
	if p == nil || p.chatID != chatID {
		return nil
	}
	delete(g.pairs, replyTo)
	if !time.Now().Before(p.due) {
		return nil // too late to be the response; the reply goes to the chat
	}
	return p
}

// answerPair sends the Hub's reply to a /pair as its ephemeral response
// (only its user sees it). The response has no message id to return.
func (g *Gateway) answerPair(ctx context.Context, s *discordgo.Session, p *pendingPair, r adapter.Reply) (string, error) {
	chunks := render(r)
	if len(chunks) != 1 {
		return "", errors.New("the reply does not fit one message")
	}
	text := chunks[0]
	return "", g.respond(ctx, s, p.in, commandResponse{Type: responseChannelMessage, Data: commandResponseData{
		Content: text, Flags: discordgo.MessageFlagsEphemeral | discordgo.MessageFlagsSuppressEmbeds, AllowedMentions: noMentions()}})
}

// expirePairs forgets the /pair uses whose reply did not come in time;
// they stay unanswered.
func (g *Gateway) expirePairs() {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for id, p := range g.pairs {
		if !now.Before(p.due) {
			delete(g.pairs, id)
		}
	}
}
