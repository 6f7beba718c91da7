package discord

import (
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/bwmarrin/discordgo"
)

// apiVersion is the Discord API version latch speaks (REST paths and the
// gateway's ?v=).
const apiVersion = "10"

// endpointsMu serialises SetAPIBase calls. It cannot protect discordgo's
// readers, which read the variables without a lock; see SetAPIBase.
var endpointsMu sync.Mutex

// SetAPIBase points discordgo at the Discord API under base (scheme and
// host, optionally a path prefix; DefaultAPIURL is discord.com): every REST
// endpoint becomes base + "/api/v10/...", and the gateway URL is then
// whatever that API's GET /gateway announces.
//
// discordgo keeps its endpoints in package-level variables, and most of
// them (EndpointAPI, EndpointChannels, EndpointUsers, EndpointGateway, …)
// are computed from EndpointDiscord once, when the package initialises; so
// changing EndpointDiscord alone changes nothing. SetAPIBase reassigns each
// of those string variables; the Endpoint* functions build their URLs from
// them at call time and follow. The CDN endpoints are left alone: latch
// downloads attachments from the URL each message carries and uses no
// other CDN helper.
//
// These variables are process-global: every discordgo session in the
// process uses the last base set, and discordgo reads them without
// synchronisation. So a process can talk to one Discord API base at a
// time: set it before creating a session (Gateway.Start does), and never
// while a session of another base is in use. Tests in one package must use
// one base at a time (no t.Parallel across fakes). Calling it again with
// the base already set writes nothing, so a running session is not
// disturbed.
func SetAPIBase(base string) error {
	base = strings.TrimRight(strings.TrimSpace(base), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("discord: invalid api_url %q: want an http(s) URL", base)
	}
	discordURL := base + "/"
	api := discordURL + "api/v" + apiVersion + "/"
	endpointsMu.Lock()
	defer endpointsMu.Unlock()
	if discordgo.EndpointDiscord == discordURL && discordgo.EndpointAPI == api && discordgo.APIVersion == apiVersion {
		return nil
	}
	discordgo.APIVersion = apiVersion
	discordgo.EndpointDiscord = discordURL
	discordgo.EndpointAPI = api
	discordgo.EndpointGuilds = api + "guilds/"
	discordgo.EndpointChannels = api + "channels/"
	discordgo.EndpointUsers = api + "users/"
	discordgo.EndpointGateway = api + "gateway"
	discordgo.EndpointGatewayBot = discordgo.EndpointGateway + "/bot"
	discordgo.EndpointWebhooks = api + "webhooks/"
	discordgo.EndpointStickers = api + "stickers/"
	discordgo.EndpointStageInstances = api + "stage-instances"
	discordgo.EndpointSKUs = api + "skus"
	discordgo.EndpointVoice = api + "/voice/"
	discordgo.EndpointVoiceRegions = discordgo.EndpointVoice + "regions"
	discordgo.EndpointNitroStickersPacks = api + "/sticker-packs"
	discordgo.EndpointGuildCreate = api + "guilds"
	discordgo.EndpointApplications = api + "applications"
	discordgo.EndpointOAuth2 = api + "oauth2/"
	discordgo.EndpointOAuth2Applications = discordgo.EndpointOAuth2 + "applications"
	discordgo.EndpointOauth2 = discordgo.EndpointOAuth2
	discordgo.EndpointOauth2Applications = discordgo.EndpointOAuth2Applications
	return nil
}
