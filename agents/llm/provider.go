package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// class is how a failed attempt is treated.
type class int

const (
	classOK class = iota
	// classRateLimited: 429; wait (Retry-After) and retry, pausing the gate.
	classRateLimited
	// classTransient: 5xx, 408, network, timeout, a malformed or empty
	// answer; retry with backoff.
	classTransient
	// classPermanent: any other 4xx, or a request the client refuses to
	// send; recorded, never retried.
	classPermanent
)

// outcome is what one HTTP attempt gave.
type outcome struct {
	resp       schemas.LLMResponse
	usageKnown bool
	class      class
	err        error
	status     int
	// retryAfter is the endpoint's Retry-After, when it sent one.
	retryAfter    time.Duration
	hasRetryAfter bool
}

// ireq is a chat-completion request as go-openai sends it.
type ireq = openai.ChatCompletionRequest

// provider makes chat-completion calls over go-openai.
type provider struct {
	api   *openai.Client
	cfg   *Config
	now   func() time.Time
	tools toolJSON
}

func newProvider(cfg *Config, hc *http.Client, now func() time.Time) *provider {
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	if hc == nil {
		hc = &http.Client{}
	}
	oc.HTTPClient = &headerDoer{c: hc, now: now}
	return &provider{api: openai.NewClientWithConfig(oc), cfg: cfg, now: now}
}

// headerDoer completes the body of an attempt's request with the messages
// and tools the provider encoded (see toolJSON.split), and reads Retry-After
// from failed responses, which go-openai's errors do not carry, into the
// attempt's box.
type headerDoer struct {
	c   *http.Client
	now func() time.Time
}

type boxKey struct{}

// headerBox carries one attempt's encoded messages and tools to the doer,
// and receives what the doer saw of its response.
type headerBox struct {
	members    []byte // nil: go-openai encoded the whole request
	mu         sync.Mutex
	retryAfter time.Duration
	set        bool
}

func (h *headerDoer) Do(req *http.Request) (*http.Response, error) {
	box, _ := req.Context().Value(boxKey{}).(*headerBox)
	if box != nil && box.members != nil {
		if err := fill(req, box.members); err != nil {
			return nil, err
		}
	}
	resp, err := h.c.Do(req)
	if err == nil && resp.StatusCode >= 400 {
		if box != nil {
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), h.now()); ok {
				box.mu.Lock()
				box.retryAfter, box.set = d, true
				box.mu.Unlock()
			}
		}
	}
	return resp, err
}

// parseRetryAfter reads seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// chunkFunc receives streamed pieces: kind is "text", "tool_start" (a tool
// name) or "tool_delta" (arguments).
type chunkFunc func(kind, text string)

// call makes one attempt. The attempt's own deadline (Timeout, and
// IdleTimeout between streamed chunks) ends it as transient; ctx ending ends
// it with ctx's error, classed by the caller.
func (p *provider) call(ctx context.Context, req openai.ChatCompletionRequest, stream bool, onChunk chunkFunc) outcome {
	box := &headerBox{}
	if stub, members, ok := p.tools.split(req); ok {
		// go-openai checks the request it is handed against its model, one
		// check by its tools, which the stub lacks: that check runs here.
		if err := openai.NewReasoningValidator().Validate(req); err != nil {
			out := outcome{err: err}
			out.class, out.status = classify(err)
			return out
		}
		req, box.members = stub, members
	}
	actx, cancel := context.WithTimeoutCause(context.WithValue(ctx, boxKey{}, box), p.cfg.Timeout,
		fmt.Errorf("no complete answer within %s", p.cfg.Timeout))
	defer cancel()
	var out outcome
	if stream {
		out = p.stream(actx, req, onChunk)
	} else {
		out = p.whole(actx, req)
	}
	if out.err != nil {
		if cause := context.Cause(actx); cause != nil && ctx.Err() == nil && !errors.Is(cause, context.Canceled) {
			out.err = fmt.Errorf("%w (%w)", cause, out.err)
		}
		out.class, out.status = classify(out.err)
		box.mu.Lock()
		out.retryAfter, out.hasRetryAfter = box.retryAfter, box.set
		box.mu.Unlock()
	}
	return out
}

func (p *provider) whole(ctx context.Context, req openai.ChatCompletionRequest) outcome {
	resp, err := p.api.CreateChatCompletion(ctx, req)
	if err != nil {
		return outcome{err: err}
	}
	if len(resp.Choices) == 0 {
		return outcome{err: errEmptyAnswer, class: classTransient}
	}
	ch := resp.Choices[0]
	out := outcome{resp: schemas.LLMResponse{Model: resp.Model, Content: ch.Message.Content, FinishReason: string(ch.FinishReason)}}
	for _, tc := range ch.Message.ToolCalls {
		out.resp.ToolCalls = append(out.resp.ToolCalls, schemas.LLMToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if resp.Usage.TotalTokens > 0 || resp.Usage.PromptTokens > 0 {
		out.usageKnown = true
		out.resp.Usage = schemas.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, TotalTokens: resp.Usage.TotalTokens}
	}
	return out
}

var errEmptyAnswer = errors.New("the endpoint answered with no choices")

// errIdle ends a stream that went silent.
type errIdle struct{ d time.Duration }

func (e errIdle) Error() string { return fmt.Sprintf("the stream sent nothing for %s", e.d) }

// stream reads a streamed answer, accumulating content and tool calls (one
// builder per tool-call index, returned in index order) and handing pieces
// to onChunk. A watchdog cancels a stream silent for IdleTimeout.
func (p *provider) stream(ctx context.Context, req openai.ChatCompletionRequest, onChunk chunkFunc) outcome {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := p.cfg.IdleTimeout
	watchdog := time.AfterFunc(idle, func() { cancel(errIdle{idle}) })
	defer watchdog.Stop()

	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	s, err := p.api.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return p.streamErr(ctx, err)
	}
	defer s.Close()
	var out outcome
	var content strings.Builder
	calls := map[int]*schemas.LLMToolCall{}
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return p.streamErr(ctx, err)
		}
		watchdog.Reset(idle)
		if chunk.Model != "" {
			out.resp.Model = chunk.Model
		}
		if chunk.Usage != nil {
			out.usageKnown = true
			out.resp.Usage = schemas.Usage{PromptTokens: chunk.Usage.PromptTokens, CompletionTokens: chunk.Usage.CompletionTokens, TotalTokens: chunk.Usage.TotalTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				content.WriteString(ch.Delta.Content)
				onChunk("text", ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				idx := len(calls)
				if tc.Index != nil {
					idx = *tc.Index
				} else if tc.ID == "" && len(calls) > 0 {
					idx = len(calls) - 1 // a continuation without an index
				}
				b, ok := calls[idx]
				if !ok {
					b = &schemas.LLMToolCall{}
					calls[idx] = b
				}
				if tc.ID != "" {
					b.ID = tc.ID
				}
				if tc.Function.Name != "" {
					b.Name += tc.Function.Name
					onChunk("tool_start", tc.Function.Name)
				}
				if tc.Function.Arguments != "" {
					b.Arguments += tc.Function.Arguments
					onChunk("tool_delta", tc.Function.Arguments)
				}
			}
			if ch.FinishReason != "" {
				out.resp.FinishReason = string(ch.FinishReason)
			}
		}
	}
	out.resp.Content = content.String()
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		out.resp.ToolCalls = append(out.resp.ToolCalls, *calls[i])
	}
	if out.resp.FinishReason == "" && out.resp.Content == "" && len(out.resp.ToolCalls) == 0 {
		return outcome{err: fmt.Errorf("the stream ended without an answer: %w", errEmptyAnswer)}
	}
	return out
}

func (p *provider) streamErr(ctx context.Context, err error) outcome {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		var idle errIdle
		if errors.As(cause, &idle) {
			return outcome{err: fmt.Errorf("%w (%w)", cause, err)}
		}
	}
	return outcome{err: err}
}

// classify says how to treat an attempt's error, and its HTTP status if any.
func classify(err error) (class, int) {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	status := 0
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	switch {
	case status == http.StatusTooManyRequests:
		return classRateLimited, status
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		return classTransient, status
	case status >= 400:
		return classPermanent, status
	}
	for _, local := range []error{
		openai.ErrChatCompletionInvalidModel, openai.ErrContentFieldsMisused,
		openai.ErrReasoningModelMaxTokensDeprecated, openai.ErrReasoningModelLimitationsLogprobs,
		openai.ErrReasoningModelLimitationsOther, openai.ErrReasoningEffortUnsupported,
		openai.ErrReasoningToolsRequireResponses, openai.ErrReasoningSamplingUnsupported,
	} {
		if errors.Is(err, local) {
			return classPermanent, 0
		}
	}
	return classTransient, 0
}

// request builds the go-openai request.
func (p *provider) request(model string, msgs []schemas.LLMMessage, specs []tools.ToolSpec, jsonMode bool, maxTokens int) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: model, Messages: make([]openai.ChatCompletionMessage, 0, len(msgs))}
	for _, m := range msgs {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		req.Messages = append(req.Messages, om)
	}
	for _, s := range specs {
		req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: json.RawMessage(s.Parameters),
		}})
	}
	if jsonMode {
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	if maxTokens > 0 {
		if reasoningModel(model) {
			req.MaxCompletionTokens = maxTokens
		} else {
			req.MaxTokens = maxTokens
		}
	}
	return req
}

func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}
