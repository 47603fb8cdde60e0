package llm

import (
	"context"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// maxHandoffBytes bounds the text handed to the Archivalist in one event.
const maxHandoffBytes = 256 << 10

// CategoryContextOverflow is the history category of conversation parts
// handed to the Archivalist when a context window overflows.
const CategoryContextOverflow = "context_overflow"

// FitRequest is a conversation to fit into the model's window.
type FitRequest struct {
	// Key names the summary call, like Request.Key.
	Key      string
	Messages []schemas.LLMMessage
	Tools    []tools.ToolSpec
	Model    string
	DAGID    string
	NodeID   string
}

// Fit returns the conversation shrunk to fit the context window
// (MaxContextTokens less ReserveTokens and the tool specs), and whether it
// changed. Nothing is dropped silently (seed L4315-4420, whose strategies 2
// and 3 could never run): the system messages and the task (the first user
// message) stay, the most recent messages that fit in half of what is left
// stay, and the messages in between are handed to the Archivalist (a
// store_request event, category context_overflow) and replaced by a summary
// the model writes (a recorded call, key Key+"/summary"). If the summary
// cannot be had (a budget, a refusal), a note says what was left out and where
// it went. A single message too long for the window is cut in the middle,
// with a note of the cut. Callers keep the returned conversation: the
// decisions are deterministic, so a redelivery makes the same ones and reuses
// the recorded summary.
func (c *Client) Fit(ctx context.Context, d *agents.Delivery, r FitRequest) ([]schemas.LLMMessage, bool, error) {
	msgs := r.Messages
	available := c.conf().MaxContextTokens - c.conf().ReserveTokens - EstimateTokens(nil, r.Tools)
	if EstimateTokens(msgs, nil) <= available {
		return msgs, false, nil
	}
	h := 0
	for h < len(msgs) && msgs[h].Role == "system" {
		h++
	}
	if h < len(msgs) && msgs[h].Role == "user" {
		h++
	}
	head := msgs[:h]
	room := available - EstimateTokens(head, nil) - 200 // the summary note
	t := len(msgs)
	for used := 0; t > h; t-- {
		n := EstimateTokens(msgs[t-1:t], nil)
		if used+n > room/2 {
			break
		}
		used += n
	}
	// A tool message must follow the assistant message that called it.
	for t < len(msgs) && msgs[t].Role == "tool" {
		t++
	}
	if t == len(msgs) {
		// Not even the last message fits in half the room: keep it (and its
		// tool results) anyway, cut to fit.
		t = len(msgs) - 1
		for t > h && msgs[t].Role == "tool" {
			t--
		}
	}
	tail := cutToFit(msgs[t:], room/2)
	overflow := msgs[h:t]
	out := append([]schemas.LLMMessage(nil), head...)
	if len(overflow) > 0 {
		note, err := c.compact(ctx, d, r, overflow, room)
		if err != nil {
			return nil, false, err
		}
		out = append(out, schemas.LLMMessage{Role: "user", Content: note})
	}
	out = append(out, tail...)
	return out, true, nil
}

// compact hands overflow to the Archivalist and returns the message that
// stands for it: a summary, or a note when there is none.
func (c *Client) compact(ctx context.Context, d *agents.Delivery, r FitRequest, overflow []schemas.LLMMessage, room int) (string, error) {
	text := render(overflow)
	where := "it was not handed off"
	stored := text
	if len(stored) > maxHandoffBytes {
		stored = stored[:maxHandoffBytes] + "\n[... cut at 256 KiB]"
	}
	env, err := d.Derive(schemas.TypeStoreRequest, "archivalist", "context_overflow/"+r.Key, schemas.StoreRequest{
		Category: CategoryContextOverflow, Content: stored, Tags: tagsOf(d.Agent, r.DAGID, r.NodeID),
	})
	if err == nil {
		if _, err = d.AppendNow(ctx, env); err == nil {
			where = "the Archivalist holds the full text (store_request " + env.ID + ")"
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		c.log.Warn("llm context: hand-off to the Archivalist failed", "agent", d.Agent, "err", err)
	}
	summaryIn := cutMiddle(text, max(1000, room*2)) // about half the room, in bytes
	resp, _, err := c.Complete(ctx, d, Request{
		Key: r.Key + "/summary", Model: r.Model, DAGID: r.DAGID, NodeID: r.NodeID, MaxTokens: min(1024, max(128, room/4)),
		Messages: []schemas.LLMMessage{
			{Role: "system", Content: "You compress the earlier part of an agent's working conversation so the agent can continue. " +
				"Keep every fact it will need: files read and changed, commands run and their results, errors and their causes, " +
				"decisions and why, what is done and what remains. Plain text, no preamble."},
			{Role: "user", Content: summaryIn},
		},
	})
	if err == nil && strings.TrimSpace(resp.Content) != "" {
		return fmt.Sprintf("[Context summary of %d earlier messages; %s]\n%s", len(overflow), where, strings.TrimSpace(resp.Content)), nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	c.log.Warn("llm context: no summary; leaving a note instead", "agent", d.Agent, "err", err)
	return fmt.Sprintf("[%d earlier messages (about %d tokens) were left out of this context to fit the model's window; %s. "+
		"They held the work done so far: re-read files you need rather than assume their content.]",
		len(overflow), EstimateTokens(overflow, nil), where), nil
}

func tagsOf(agent, dag, node string) []string {
	tags := []string{agent}
	if dag != "" {
		tags = append(tags, "dag:"+dag)
	}
	if node != "" {
		tags = append(tags, "node:"+node)
	}
	return tags
}

// render writes messages as plain text.
func render(msgs []schemas.LLMMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "  -> %s(%s)\n", tc.Name, tc.Arguments)
		}
	}
	return b.String()
}

// cutToFit cuts the longest contents of msgs in the middle until they fit in
// tokens.
func cutToFit(msgs []schemas.LLMMessage, tokens int) []schemas.LLMMessage {
	out := append([]schemas.LLMMessage(nil), msgs...)
	for EstimateTokens(out, nil) > tokens {
		longest := 0
		for i := range out {
			if len(out[i].Content) > len(out[longest].Content) {
				longest = i
			}
		}
		over := (EstimateTokens(out, nil) - tokens) * 4
		keep := len(out[longest].Content) - over - 100
		if keep < 200 {
			keep = 200
		}
		if keep >= len(out[longest].Content) {
			break
		}
		out[longest].Content = cutMiddle(out[longest].Content, keep)
	}
	return out
}

// cutMiddle keeps the first and last parts of s within n bytes, with a note
// of what was cut.
func cutMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	half := n / 2
	cut := s[:half] + fmt.Sprintf("\n[... %d bytes cut to fit the context window ...]\n", len(s)-2*half) + s[len(s)-half:]
	return strings.ToValidUTF8(cut, "")
}
