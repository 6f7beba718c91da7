package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	slackApp = "xapp-1-A0LATCH-1234-appSECRETvalue"
	slackBot = "xoxb-1234-5678-botSECRETvalue"
)

func TestSlackConfig(t *testing.T) {
	cfg, err := loadDiscord(t, "[slack]\napp_token = \""+slackApp+"\"\nbot_token = \""+slackBot+"\"\nallow_groups = true\napi_url = \"http://127.0.0.1:9/api/\"\n", 0o600, nil)
	if err != nil || cfg.Slack.AppToken != slackApp || cfg.Slack.BotToken != slackBot || !cfg.Slack.AllowGroups ||
		cfg.Slack.APIURL != "http://127.0.0.1:9/api" || !cfg.Slack.Enabled() {
		t.Fatalf("file: %+v, %v", cfg, err)
	}
	if strings.Contains(cfg.Slack.String(), "SECRET") || strings.Contains(cfg.Slack.GoString(), "SECRET") {
		t.Error("String shows a token")
	}
	cfg, err = loadDiscord(t, "", 0o600, map[string]string{EnvSlackAppToken: slackApp, EnvSlackBotToken: slackBot})
	if err != nil || !cfg.Slack.Enabled() || cfg.Slack.BotTokenSource != EnvSlackBotToken || cfg.Slack.APIURL != DefaultSlackAPIURL {
		t.Fatalf("env: %+v, %v", cfg, err)
	}
	home := t.TempDir()
	for name, tok := range map[string]string{"app": slackApp, "bot": slackBot} {
		if err := os.WriteFile(filepath.Join(home, name), []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err = loadDiscord(t, "[slack]\napp_token_file = \""+filepath.Join(home, "app")+"\"\nbot_token_file = \""+filepath.Join(home, "bot")+"\"\n", 0o600, nil)
	if err != nil || cfg.Slack.AppToken != slackApp || cfg.Slack.BotToken != slackBot || cfg.Slack.AppTokenSource != "slack.app_token_file" {
		t.Fatalf("files: %+v, %v", cfg, err)
	}
	if cfg, err := loadDiscord(t, "", 0o600, nil); err != nil || cfg.Slack.Enabled() {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
}

func TestSlackConfigRefusals(t *testing.T) {
	for name, tt := range map[string]struct {
		body string
		mode os.FileMode
		env  map[string]string
		want string
	}{
		"readable file with a token": {"[slack]\nbot_token = \"" + slackBot + "\"\napp_token = \"" + slackApp + "\"\n", 0o644, nil, "chmod 600"},
		"token and file":             {"[slack]\nbot_token = \"" + slackBot + "\"\nbot_token_file = \"x\"\n", 0o600, nil, "both set"},
		"tokens swapped":             {"[slack]\nbot_token = \"" + slackApp + "\"\napp_token = \"" + slackBot + "\"\n", 0o600, nil, "does not start with xoxb-"},
		"only one":                   {"", 0o600, map[string]string{EnvSlackBotToken: slackBot}, "needs both"},
		"bad character":              {"", 0o600, map[string]string{EnvSlackBotToken: slackBot + "!", EnvSlackAppToken: slackApp}, "never has"},
		"typo":                       {"[slack]\nallow_group = true\n", 0o600, nil, "allow_group"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadDiscord(t, tt.body, tt.mode, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error shows a token: %v", err)
			}
		})
	}
}
