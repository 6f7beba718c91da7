package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/config"
)

// botState is what the telegram check leaves for the webhook check.
type botState struct {
	api *tgbotapi.BotAPI
}

// ctxDoer gives go-telegram-bot-api, which builds its requests without a
// context, the check's context.
type ctxDoer struct {
	ctx context.Context
	c   *http.Client
}

func (d ctxDoer) Do(req *http.Request) (*http.Response, error) { return d.c.Do(req.WithContext(d.ctx)) }

// checkTelegram calls getMe with the configured token, through the same
// client library and endpoint setting the gateway uses.
func (r *run) checkTelegram(ctx context.Context) Check {
	if r.cfg == nil {
		return skip("needs a config that loads")
	}
	t := r.cfg.Telegram
	if g, runs := r.daemonGateway("telegram"); runs && !t.Enabled() {
		// The daemon's view wins: it is the one that answers the chat.
		detail := fmt.Sprintf("the running daemon's Telegram gateway is %s; this shell has no bot token ([telegram] token or %s), "+
			"so doctor cannot check the token itself", gatewayState(g), config.EnvTelegramToken)
		if !g.Connected {
			return fail(detail, "look at latch logs")
		}
		return ok(detail)
	}
	if !t.Enabled() {
		return skip(fmt.Sprintf("no bot token ([telegram] token or %s); the Telegram gateway is off", config.EnvTelegramToken))
	}
	endpoint := strings.ReplaceAll(t.APIURL, "%", "%%") + "/bot%s/%s"
	api, err := tgbotapi.NewBotAPIWithClient(t.Token, endpoint, ctxDoer{ctx, r.d.httpClient()})
	if err != nil {
		return r.telegramError(err, t, tokenWhere(r.cfg))
	}
	api.Debug = false // debug logging prints request parameters
	r.bot = &botState{api: api}
	from := ""
	if t.TokenSource == config.SourceEnv {
		// Not necessarily the token the daemon has: see the daemon and
		// service checks.
		from = "; token from " + config.EnvTelegramToken + " in this shell"
	}
	return ok(fmt.Sprintf("@%s (Bot API at %s%s)", api.Self.UserName, t.APIURL, from))
}

// tokenWhere names the place the token came from, for the fix.
func tokenWhere(cfg *config.Config) string {
	switch cfg.Telegram.TokenSource {
	case config.SourceEnv:
		return config.EnvTelegramToken
	case config.SourceTokenFile:
		return "the token file " + cfg.Telegram.TokenFile
	}
	return "[telegram] token in " + cfg.Path
}

func (r *run) telegramError(err error, t config.TelegramConfig, where string) Check {
	var apiErr *tgbotapi.Error
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &apiErr):
		switch code := apiErr.Code; {
		case code == http.StatusUnauthorized:
			return fail("the Bot API rejected the token (401 Unauthorized)",
				"get a new token from @BotFather and put it in "+where)
		case code == http.StatusNotFound:
			return fail("the Bot API answered 404 Not Found: the token is malformed, or the server at "+t.APIURL+" is not a Bot API server",
				"copy the token from @BotFather again into "+where+", and check [telegram] api_url")
		case code == http.StatusTooManyRequests || code >= 500:
			return warn(fmt.Sprintf("the Bot API is busy or failing (%d %s)", code, apiErr.Message), "try again in a minute")
		default:
			return fail(fmt.Sprintf("the Bot API refused getMe (%d %s)", code, apiErr.Message),
				"check the token in "+where)
		}
	case errors.As(err, &syntaxErr), errors.As(err, &typeErr):
		return fail(fmt.Sprintf("the server at %s does not answer like the Bot API (%v)", t.APIURL, err),
			fmt.Sprintf("check [telegram] api_url (or %s); the default is %s", config.EnvTelegramAPIURL, config.DefaultTelegramAPIURL))
	}
	return fail(fmt.Sprintf("cannot reach the Bot API at %s: %s", t.APIURL, r.netError(err)),
		"check the network connection, proxy settings and [telegram] api_url")
}

// netError describes a transport error without the request URL, which
// for the Bot API holds the token. It is never empty: an API answer
// without a description used to leave nothing after the colon.
func (r *run) netError(err error) string {
	var ue *url.Error
	var apiErr *tgbotapi.Error
	var msg string
	switch {
	case errors.As(err, &ue) && ue.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", r.d.timeout())
	case errors.As(err, &ue):
		msg = ue.Err.Error()
	case errors.As(err, &apiErr):
		msg = strings.TrimSpace(fmt.Sprintf("the Bot API answered error %d %s", apiErr.Code, apiErr.Message))
		if apiErr.Message == "" {
			msg += " without a description"
		}
	default:
		msg = err.Error()
	}
	if strings.TrimSpace(msg) == "" {
		return fmt.Sprintf("an error without a message (%T)", err)
	}
	return msg
}

// checkWebhook asks whether a webhook is set for the bot. In polling mode
// Telegram refuses getUpdates while one is; the gateway deletes a webhook
// when it starts and whenever polling meets one, so a webhook is only
// trouble when something keeps setting it — another program using the same
// bot. In webhook mode ([telegram] webhook_url) the webhook must be latch's
// own, and Telegram's last delivery error says whether it reaches latch.
func (r *run) checkWebhook(ctx context.Context) Check {
	switch {
	case r.cfg == nil || !r.cfg.Telegram.Enabled():
		return skip("no bot token")
	case r.bot == nil:
		return skip("needs a bot token the Bot API accepts")
	}
	r.bot.api.Client = ctxDoer{ctx, r.d.httpClient()}
	info, err := r.bot.api.GetWebhookInfo()
	if err != nil {
		return warn("could not read the webhook setting: "+r.netError(err), "try again in a minute")
	}
	if want := r.cfg.Telegram.WebhookURL; want != "" {
		return webhookModeCheck(info, want, r.daemonUp)
	}
	if info.URL == "" {
		return ok("no webhook set; latch polls for updates")
	}
	shown := webhookHost(info.URL)
	if r.daemonUp {
		return fail(fmt.Sprintf("a webhook is set (%s) while latch runs: latch removed any webhook when it started, "+
			"so another program using this bot token set this one since, and the two now fight over its updates", shown),
			"stop the other program, or give latch a bot of its own (@BotFather, /newbot) and put its token in "+tokenWhere(r.cfg))
	}
	return warn(fmt.Sprintf("a webhook is set (%s); latch polls, and removes it when it starts, which cuts off whatever set it", shown),
		fmt.Sprintf("if it is a leftover, nothing: latch run removes it (or now: curl -s %s/bot<token>/deleteWebhook); "+
			"if another program uses this bot, give latch a bot of its own (@BotFather, /newbot)", r.cfg.Telegram.APIURL))
}

// webhookModeCheck judges the webhook Telegram reports when latch is
// configured to receive updates by webhook at want.
func webhookModeCheck(info tgbotapi.WebhookInfo, want string, daemonUp bool) Check {
	shown := webhookHost(want)
	switch {
	case info.URL == "" && daemonUp:
		return fail("no webhook is set although latch runs in webhook mode: updates are not delivered",
			"restart latch (it sets the webhook when it starts, and again within a minute if it disappears)")
	case info.URL == "":
		return warn("no webhook set yet; latch sets "+shown+" when it starts", "latch run")
	case info.URL != want:
		return fail(fmt.Sprintf("the webhook is %s, not latch's %s: another program using this bot token set it", webhookHost(info.URL), shown),
			"stop the other program, or give latch a bot of its own (@BotFather, /newbot)")
	case info.LastErrorDate != 0 && info.LastErrorMessage != "":
		at := time.Unix(int64(info.LastErrorDate), 0).UTC().Format(time.RFC3339)
		return warn(fmt.Sprintf("webhook %s is set; Telegram's last delivery failed at %s: %s (%d update(s) waiting)",
			shown, at, info.LastErrorMessage, info.PendingUpdateCount),
			"check that the reverse proxy forwards "+shown+" to [telegram] webhook_listen and that latch runs")
	}
	return ok(fmt.Sprintf("webhook %s is set (%d update(s) waiting)", shown, info.PendingUpdateCount))
}

// webhookHost shows a webhook URL by its scheme and host only: its path
// often carries a secret.
func webhookHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "a URL that does not parse"
	}
	s := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		s += "/…"
	}
	return s
}
