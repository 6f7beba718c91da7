//go:build goolm

package daemon

import "testing"

// The encrypted half of the Matrix end-to-end tests: the owner and the
// stranger are mautrix OlmMachines (goolm, hence the build tag; .ci/run
// runs these), every room is encrypted, and latch must read and answer
// encrypted, keep its keys across a kill -9, and decrypt what was sent
// while it was down.

// TestDendriteE2EEStory: the whole story in an encrypted DM.
func TestDendriteE2EEStory(t *testing.T) { matrixStory(t, true) }

// TestDendriteE2EEKill9: kill -9 mid-command in an encrypted DM.
func TestDendriteE2EEKill9(t *testing.T) { matrixKill9(t, true) }

// TestDendriteE2EELongAnswer: a long streamed answer in an encrypted DM,
// where Megolm's base64 makes every event a third larger.
func TestDendriteE2EELongAnswer(t *testing.T) { matrixLongAnswer(t, true) }
