package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/gateways/matrix/matrixtest"
	"github.com/latchd/latch/gateways/slack/slacktest"
)

// platformFake is a chat platform's fake as the bench drives it beside
// Telegram's: what it accepts and where, and pairing the owner's private
// chat once latch has minted a code for the platform.
type platformFake interface {
	// secret is the value of the platform's secret key
	// (config.PlatformSecret.Key) that the fake accepts.
	secret(key string) string
	url() string
	// sendPair sends "/pair code" from the owner's private chat;
	// waitPaired waits for latch's "Paired" there.
	sendPair(code string)
	waitPaired(ctx context.Context) error
	Close()
}

// platformFakes are the fakes of the platforms of config.Platforms beyond
// Telegram (the bench's own fake), by name. A platform the table has and
// this map does not is measured by no run, and the cost table says so:
// a new platform needs only its entry here.
var platformFakes = map[string]func() platformFake{
	"discord": newDiscordFake,
	"matrix":  newMatrixFake,
	"slack":   newSlackFake,
}

// extraPlatforms are the platforms of config.Platforms beyond Telegram,
// those the bench has a fake of and those it has none of, in the table's
// order.
func extraPlatforms() (measured []config.Platform, unmeasured []string) {
	for _, p := range config.Platforms {
		switch {
		case p.Name == config.TelegramPlatform.Name:
		case platformFakes[p.Name] != nil:
			measured = append(measured, p)
		default:
			unmeasured = append(unmeasured, p.Title)
		}
	}
	return measured, unmeasured
}

// titles names platforms for a row: "Discord and Slack".
func titles(ps []config.Platform) string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Title)
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// startedFake is a platform's fake, started, with its row of the table.
type startedFake struct {
	p config.Platform
	platformFake
}

// environ points a daemon at the fake, through the variables of the
// platform's row: each secret's and the API URL's.
func (f startedFake) environ() ([]string, error) {
	var env []string
	for _, s := range f.p.Secrets {
		if s.Env == "" {
			return nil, fmt.Errorf("%s: the secret %s has no variable to pass it in", f.p.Name, s.Key)
		}
		env = append(env, s.Env+"="+f.secret(s.Key))
	}
	return append(env, f.p.APIURLEnv+"="+f.url()), nil
}

// Discord's fake. Its bot token only opens the fake on loopback.
type discordFake struct{ *discordtest.Server }

const discordToken = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GbenCH.benchDISCORDnotAsecret-hmacValue_012345"

var discordOwner = discordtest.User{ID: "300000000000000001", Username: "owner"}

func newDiscordFake() platformFake { return discordFake{discordtest.New(discordToken)} }

func (discordFake) secret(string) string { return discordToken }
func (f discordFake) url() string        { return f.URL() }

func (f discordFake) sendPair(code string) { f.SendDM(discordOwner, "/pair "+code) }

func (f discordFake) waitPaired(ctx context.Context) error {
	dm := f.DMChannel(discordOwner)
	_, err := f.WaitSent(ctx, func(s discordtest.Sent) bool {
		return s.ChannelID == dm && strings.HasPrefix(s.Content, "Paired")
	})
	return err
}

// Slack's fake, with a bot token and an app-level token (Socket Mode),
// which only open the fake on loopback.
type slackFake struct{ *slacktest.Server }

const (
	slackBotToken = "xoxb-1-2-benchSLACKbotNotAsecret"
	slackAppToken = "xapp-1-A0BENCH-3-benchSLACKappNotAsecret"
)

var slackOwner = slacktest.User{ID: "U0OWNER"}

func newSlackFake() platformFake { return slackFake{slacktest.New(slackBotToken, slackAppToken)} }

func (slackFake) secret(key string) string {
	if key == "app_token" {
		return slackAppToken
	}
	return slackBotToken
}

func (f slackFake) url() string { return f.URL() }

func (f slackFake) sendPair(code string) { f.SendDM(slackOwner, "/pair "+code) }

func (f slackFake) waitPaired(ctx context.Context) error {
	dm := slacktest.DM(slackOwner)
	return poll(ctx, func() bool {
		for _, m := range f.Sent(dm) {
			if strings.HasPrefix(m.Shown(), "Paired") {
				return true
			}
		}
		return false
	}, f.Changed)
}

// poll waits until done holds, looking again when changed (if any) says
// something changed and every 20 ms.
func poll(ctx context.Context, done func() bool, changed func() <-chan struct{}) error {
	for !done() {
		var c <-chan struct{}
		if changed != nil {
			c = changed()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c:
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Matrix's fake homeserver, with the owner's DM (the bot joined) and an
// access token that only opens the fake on loopback. The daemon takes
// the user and device IDs from whoami and sets up end-to-end encryption
// as it does by default (its keys go to the fake); the DM itself is not
// encrypted, since no device of the owner's runs beside the bench.
type matrixFake struct{ *matrixtest.Server }

const (
	matrixToken = "syt_bench_matrix_notAsecret"
	matrixOwner = "@owner:" + matrixtest.Domain
	matrixDM    = "!ownerdm:" + matrixtest.Domain
)

func newMatrixFake() platformFake {
	f := matrixFake{matrixtest.New(matrixToken)}
	f.Room(matrixDM, matrixtest.Bot, matrixOwner)
	return f
}

func (matrixFake) secret(string) string { return matrixToken }
func (f matrixFake) url() string        { return f.URL() }

func (f matrixFake) sendPair(code string) { f.Text(matrixOwner, matrixDM, "/pair "+code) }

// waitPaired polls: the fake has no notice of what the bot sends.
func (f matrixFake) waitPaired(ctx context.Context) error {
	return poll(ctx, func() bool {
		for _, m := range f.Sent(matrixDM) {
			if strings.HasPrefix(m.Body, "Paired") {
				return true
			}
		}
		return false
	}, nil)
}
