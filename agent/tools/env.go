package tools

import (
	"os"
	"strings"

	"github.com/latchd/latch/config"
)

// RunMarker is set to "1" in every environment SafeEnv builds, so a program
// can tell that it runs under latch (and, for example, refuse to mint a
// pairing code from inside a chat-driven command).
const RunMarker = "LATCH_RUN"

// SafeEnv returns the daemon's environment minus the credentials latch itself
// holds, plus LATCH_RUN=1. Commands run from the chat or by the model get this
// environment: whatever they print may end up in the chat or the model's
// context, so the bot tokens and provider API keys must not be in it.
//
// Removed are:
//   - every variable a platform of config.Platforms reads a secret from
//     (LATCH_TELEGRAM_TOKEN, LATCH_DISCORD_TOKEN), and every other LATCH_*
//     variable whose name contains TOKEN, SECRET or KEY;
//   - the credentials the embedded provider SDKs read: ANTHROPIC_API_KEY and
//     ANTHROPIC_AUTH_TOKEN (Anthropic), OPENAI_API_KEY (OpenAI and
//     OpenAI-compatible providers).
//
// Also withheld, though they are no secret of latch's: SSH_AUTH_SOCK, which
// would let a command (or a prompt-injected model) log in elsewhere with the
// keys the owner unlocked for their own session, and DBUS_SESSION_BUS_ADDRESS,
// through which tools reach the session's keyring (secret-tool), the user
// service manager (systemd-run --user) and the desktop without being asked.
// Neither is a boundary: a process of the owner's uid finds the bus at
// $XDG_RUNTIME_DIR/bus and an agent socket under /tmp or /run/user; it only
// stops programs from using them by default. XDG_RUNTIME_DIR passes: it names
// no credential, and many tools keep their runtime files there.
//
// Other credentials, such as GITHUB_TOKEN, are the owner's and pass through on
// purpose: the owner's commands need them, and they are not latch's to hide.
func SafeEnv() []string {
	return filterEnv(os.Environ())
}

// filterEnv applies SafeEnv's rules to environ, a list of "NAME=value".
func filterEnv(environ []string) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if isLatchSecret(name) || name == RunMarker || withheld(name) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, RunMarker+"=1")
}

// withheld reports whether name is a session variable SafeEnv leaves out
// (see there for why).
func withheld(name string) bool {
	return name == "SSH_AUTH_SOCK" || name == "DBUS_SESSION_BUS_ADDRESS"
}

// IsLatchSecret reports whether name is a variable latch reads a
// credential from (the daemon clears them from its own environment).
func IsLatchSecret(name string) bool { return isLatchSecret(name) }

// isLatchSecret reports whether name is a variable latch reads a credential
// from. Names are compared upper-cased so that an odd spelling errs on the
// side of hiding.
func isLatchSecret(name string) bool {
	upper := strings.ToUpper(name)
	switch upper {
	case "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY":
		return true
	}
	if config.IsPlatformSecretEnv(upper) {
		return true
	}
	if !strings.HasPrefix(upper, "LATCH_") {
		return false
	}
	for _, word := range []string{"TOKEN", "SECRET", "KEY"} {
		if strings.Contains(upper, word) {
			return true
		}
	}
	return false
}
