package gateways

import (
	"strings"
	"testing"
)

// TestPairedMessageSaysWhatPlainTextDoes: the message a chat gets when it
// latches listed !commands and the slash commands but not that plain text
// goes to the agent, the thing most owners pair for.
func TestPairedMessageSaysWhatPlainTextDoes(t *testing.T) {
	for _, want := range []string{"plain text", "agent", "!<command>", "/help"} {
		if !strings.Contains(MsgPaired, want) {
			t.Errorf("MsgPaired %q does not mention %q", MsgPaired, want)
		}
	}
}
