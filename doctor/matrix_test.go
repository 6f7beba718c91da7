package doctor

import (
	"strings"
	"testing"

	"github.com/latchd/latch/gateways/matrix/matrixtest"
)

const matrixToken = "syt_bGF0Y2g_doctorsecretvalue_1"

// TestMatrixCheck: whoami with the configured token; a device without
// keys yet warns with "start latch" as the fix; a refused token fails
// with the way to a new one; no token shows.
func TestMatrixCheck(t *testing.T) {
	srv := matrixtest.New(matrixToken)
	defer srv.Close()
	conf := func(tok string) string {
		return tomlConfig("matrix.homeserver", srv.URL(), "matrix.user_id", matrixtest.Bot, "matrix.access_token", tok)
	}
	rep := newFixture(t, conf(matrixToken)).run(t)
	wantCheck(t, rep, "matrix", Warn, []string{matrixtest.Bot, "no encryption keys"}, []string{"start latch"})
	rep = newFixture(t, conf("syt_bGF0Y2g_wrongsecretvalue_1")).run(t)
	wantCheck(t, rep, "matrix", Fail, []string{"M_UNKNOWN_TOKEN"}, []string{"access_token_file"})
	assertNoSecrets(t, rep)
	for _, c := range rep.Checks {
		if strings.Contains(c.Detail+c.Fix, "secretvalue") {
			t.Errorf("check %s shows a token: %s %s", c.Name, c.Detail, c.Fix)
		}
	}
	if rep := newFixture(t, tomlConfig()).run(t); check(t, rep, "matrix").Status != Skip {
		t.Error("no token: the check does not skip")
	}
}
