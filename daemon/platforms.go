package daemon

import (
	"fmt"
	"log/slog"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord"
	"github.com/latchd/latch/gateways/slack"
	"github.com/latchd/latch/gateways/telegram"
)

// Platform is one row of the platform table: config's description of the
// platform (its section, variables and secrets) and the code that runs
// it. The table lives here, not in gateways or config, because it must
// import both config and every adapter, and config must stay a leaf.
type Platform struct {
	config.Platform
	// New builds the gateway from its section of cfg; it is called only
	// when the section has a token.
	New func(cfg *config.Config, log *slog.Logger) gateways.Gateway
	// PairLink returns the link that opens the bot with a pairing code
	// filled in, for a bot named bot; nil when the platform has none. It
	// serves `latch pair` when no daemon runs (a running gateway answers
	// through gateways.PairLinker).
	PairLink func(bot, code string) string
	// Binary, when set, is the executable (beside latch) whose build links
	// the adapter; New is nil until that build calls [LinkGateway].
	Binary string
}

// LinkGateway fills in New for the platform called name: the adapter is
// linked into this binary. A build that links an optional adapter (see
// Platform.Binary) calls it before main; it panics on an unknown name.
func LinkGateway(name string, new func(cfg *config.Config, log *slog.Logger) gateways.Gateway) {
	for i := range Platforms {
		if Platforms[i].Name == name {
			Platforms[i].New = new
			return
		}
	}
	panic("daemon.LinkGateway: no platform " + name)
}

// Unlinked returns the platforms cfg enables whose adapters this binary
// does not link, so that the daemon cannot run them.
func Unlinked(cfg *config.Config) []Platform { return unlinked(Platforms, cfg) }

func unlinked(table []Platform, cfg *config.Config) []Platform {
	var out []Platform
	for _, p := range table {
		if p.New == nil && p.Settings(cfg).Enabled() {
			out = append(out, p)
		}
	}
	return out
}

// CheckLinked fails, with ErrConfig, when cfg enables a platform whose
// adapter this binary does not link: the daemon would not run it, and
// running without it would silently drop a gateway the owner configured.
func CheckLinked(cfg *config.Config) error { return checkLinked(Platforms, cfg) }

func checkLinked(table []Platform, cfg *config.Config) error {
	for _, p := range unlinked(table, cfg) {
		return fmt.Errorf("%w: [%s] is configured, and this latch binary does not link the %s adapter: %s runs it "+
			"(latch starts it from beside itself at start-up; restart latch, and build %s beside it if it is missing)",
			ErrConfig, p.Name, p.Title, p.Binary, p.Binary)
	}
	return nil
}

// Platforms is the platform table, in config.Platforms' order (a test
// checks). Adding a platform is one row here, its section in config, and
// its adapter under gateways/.
var Platforms = []Platform{
	{Platform: config.TelegramPlatform,
		New: func(cfg *config.Config, log *slog.Logger) gateways.Gateway {
			t := cfg.Telegram
			return telegram.New(telegram.Config{Token: t.Token, APIURL: t.APIURL, Verbosity: t.Verbosity,
				WebhookURL: t.WebhookURL, WebhookListen: t.WebhookListen, WebhookSecret: t.WebhookSecret,
				AllowGroups: t.AllowGroups}, log)
		},
		PairLink: telegram.StartLink},
	{Platform: config.DiscordPlatform,
		New: func(cfg *config.Config, log *slog.Logger) gateways.Gateway {
			c := cfg.Discord
			return discord.New(discord.Config{Token: c.Token, APIURL: c.APIURL, AllowGroups: c.AllowGroups,
				Verbosity: c.Verbosity}, log)
		}},
	{Platform: config.SlackPlatform,
		New: func(cfg *config.Config, log *slog.Logger) gateways.Gateway {
			c := cfg.Slack
			return slack.New(slack.Config{AppToken: c.AppToken, BotToken: c.BotToken, APIURL: c.APIURL,
				AllowGroups: c.AllowGroups, Verbosity: c.Verbosity}, log)
		}},
	// Matrix's adapter is linked into latch-matrix only (cmd/latch-matrix
	// calls LinkGateway): mautrix's package initialisers cost every daemon
	// that links it idle memory, configured or not. latch runs latch-matrix
	// in its place when [matrix] is configured (cli).
	{Platform: config.MatrixPlatform, Binary: "latch-matrix"},
}

// allowGroups is the Hub's per-gateway group setting.
func allowGroups(cfg *config.Config) map[string]bool {
	out := make(map[string]bool, len(Platforms))
	for _, p := range Platforms {
		out[p.Name] = p.Settings(cfg).AllowGroups
	}
	return out
}

// PlatformNamed returns the row of [Platforms] called name.
func PlatformNamed(name string) (Platform, bool) {
	for _, p := range Platforms {
		if p.Name == name {
			return p, true
		}
	}
	return Platform{}, false
}
