package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// newClient is the OpenAI-compatible client. Retries are off: a failed
// request is shown in the transcript at once and the owner decides.
func newClient(cfg Config) openai.Client {
	opts := []option.RequestOption{option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/") + "/"), option.WithMaxRetries(0)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else {
		// Local servers (Ollama, llama.cpp) need no key; the library's
		// OPENAI_API_KEY is not read in its place.
		opts = append(opts, option.WithAPIKey(""))
	}
	return openai.NewClient(opts...)
}

// functionName turns a tool's name into a function name the API accepts
// (^[A-Za-z0-9_-]{1,64}$): records.put is records_put.
var badFunctionChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// toolset is the registry's tools as the model sees them, by function name.
type toolset struct {
	byFunction map[string]*tools.Tool
	params     []openai.ChatCompletionToolUnionParam
}

// offerTools lists the registry's tools for the model, each with a
// required rationale next to its own arguments. A tool whose schema is not
// an object or already has a rationale property is not offered.
func offerTools(list []*tools.Tool) toolset {
	ts := toolset{byFunction: map[string]*tools.Tool{}}
	sorted := append([]*tools.Tool(nil), list...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, t := range sorted {
		if t.Caller {
			continue // the caller runs it (docs/caller-tools.md): a chat model cannot
		}
		var schema map[string]any
		if err := json.Unmarshal(t.Schema, &schema); err != nil || schema["type"] != "object" {
			continue
		}
		props, _ := schema["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
		}
		if _, taken := props["rationale"]; taken {
			continue
		}
		props["rationale"] = map[string]any{"type": "string", "minLength": 10, "maxLength": 500,
			"description": "Why you make this call, in one or two sentences; the owner and approvers read it."}
		schema["properties"] = props
		required, _ := schema["required"].([]any)
		schema["required"] = append(required, "rationale")
		name := badFunctionChars.ReplaceAllString(t.Name, "_")
		if len(name) > 60 {
			name = name[:60]
		}
		for base, n := name, 2; ts.byFunction[name] != nil; n++ {
			name = fmt.Sprintf("%s_%d", base, n)
		}
		ts.byFunction[name] = t
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		desc += fmt.Sprintf(" (Gatehouse tool %s; effect: %s.)", t.Name, t.Effect)
		ts.params = append(ts.params, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: name, Description: openai.String(desc), Parameters: shared.FunctionParameters(schema)}))
	}
	return ts
}

// reply is one model answer.
type reply struct {
	Content          string
	ToolCalls        []ToolCall
	PromptTokens     int64
	CompletionTokens int64
}

// toParams turns stored messages into the library's.
func toParams(msgs []Message) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case "system":
			out = append(out, openai.SystemMessage(m.Content))
		case "user":
			out = append(out, openai.UserMessage(m.Content))
		case "tool":
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments}}})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	return out
}

// complete asks the model, streaming: onText gets the text so far as it
// arrives. The usage comes in the stream's last chunk.
func (s *Service) complete(ctx context.Context, model string, msgs []Message, ts toolset, onText func(string)) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(model),
		Messages:      toParams(msgs),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if len(ts.params) > 0 {
		params.Tools = ts.params
	}
	stream := s.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	acc := openai.ChatCompletionAccumulator{}
	var out reply
	var text strings.Builder
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0 {
			out.PromptTokens, out.CompletionTokens = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			text.WriteString(chunk.Choices[0].Delta.Content)
			onText(text.String())
		}
	}
	if err := stream.Err(); err != nil {
		return out, s.modelError(ctx, err)
	}
	if len(acc.Choices) == 0 {
		return out, &modelErr{msg: "The model endpoint answered with no message."}
	}
	msg := acc.Choices[0].Message
	out.Content = msg.Content
	if out.Content == "" {
		out.Content = text.String()
	}
	if msg.Refusal != "" && out.Content == "" {
		out.Content = msg.Refusal
	}
	seen := map[string]bool{}
	for i, c := range msg.ToolCalls {
		id := c.ID
		if id == "" || len(id) > 200 || seen[id] {
			// Some local servers send none, or the same for every call:
			// each call needs its own to be answered.
			id = fmt.Sprintf("call_%d_%d", len(out.ToolCalls), i)
		}
		seen[id] = true
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: id, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out, nil
}

// modelErr is a failure of the model endpoint, with a message safe to
// show (it never holds the API key).
type modelErr struct{ msg string }

func (e *modelErr) Error() string { return e.msg }

// modelError says plainly what went wrong with the endpoint.
func (s *Service) modelError(ctx context.Context, err error) error {
	var apiErr *openai.Error
	var msg string
	switch {
	case errors.As(err, &apiErr):
		msg = fmt.Sprintf("The model endpoint answered %d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
		if apiErr.Message != "" {
			msg += ": " + clip.Ellipsis(apiErr.Message, 300)
		}
		msg += "."
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		msg = fmt.Sprintf("The model endpoint did not finish answering within %s.", s.cfg.RequestTimeout.Round(time.Second))
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		msg = "The model endpoint could not be reached or broke off: " + clip.Ellipsis(err.Error(), 300)
	}
	if s.cfg.APIKey != "" {
		msg = strings.ReplaceAll(msg, s.cfg.APIKey, "[redacted]")
	}
	return &modelErr{msg: msg}
}
