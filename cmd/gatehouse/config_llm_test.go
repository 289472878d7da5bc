package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestLoadConfig_LLM(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := loadConfig("serve", nil, env(map[string]string{"GATEHOUSE_LLM_BASE_URL": "http://localhost:11434/v1",
		"GATEHOUSE_LLM_API_KEY": "sk-secret", "GATEHOUSE_LLM_MODEL": "llama3", "GATEHOUSE_LLM_MODELS": " qwen2 , llama3,,mistral"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.BaseURL != "http://localhost:11434/v1" || cfg.LLM.Model != "llama3" || strings.Join(cfg.LLM.Models, ",") != "qwen2,llama3,mistral" {
		t.Fatalf("LLM = %+v", cfg.LLM)
	}
	// The key is never in a log line.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "llm", cfg.LLM)
	if strings.Contains(buf.String(), "sk-secret") || !strings.Contains(buf.String(), `"api_key_set":true`) {
		t.Fatalf("log line: %s", buf.String())
	}
	if s := fmt.Sprint(cfg.LLM.LogValue()); strings.Contains(s, "sk-secret") {
		t.Fatal("the key is in the log value")
	}
	for name, kv := range map[string]map[string]string{
		"a base URL that is not http": {"GATEHOUSE_LLM_BASE_URL": "ftp://x/v1", "GATEHOUSE_LLM_MODEL": "m"},
		"credentials in the URL":      {"GATEHOUSE_LLM_BASE_URL": "https://u:p@x/v1", "GATEHOUSE_LLM_MODEL": "m"},
		"a key without a model":       {"GATEHOUSE_LLM_API_KEY": "sk"},
	} {
		if _, err := loadConfig("serve", nil, env(kv), io.Discard); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "sk") && name == "a key without a model" && strings.Contains(err.Error(), `"sk"`) {
			t.Errorf("%s: the key is in the error", name)
		}
	}
	// No model: chat is off, and that is fine.
	cfg, err = loadConfig("serve", nil, env(map[string]string{}), io.Discard)
	if err != nil || cfg.LLM.Model != "" {
		t.Fatalf("%+v %v", cfg.LLM, err)
	}
}
