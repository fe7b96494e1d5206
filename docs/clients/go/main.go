// Command flow drives a real demosvc through the client oapi-codegen
// generates from openapi.yaml, unmodified (.ci/clients generates it into
// ./client and runs this against `demosvc serve`). It exits non-zero on the
// first answer that differs from what the API promises.
//
//	DEMO_API_URL=http://127.0.0.1:8080 DEMO_API_KEY=sk_… go run .
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"demosvc.local/clients/go/client"
)

func main() {
	if err := flow(context.Background(), os.Getenv("DEMO_API_URL"), os.Getenv("DEMO_API_KEY")); err != nil {
		fmt.Fprintln(os.Stderr, "go client flow: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("go client flow: ok")
}

func flow(ctx context.Context, base, key string) error {
	if base == "" || key == "" {
		return fmt.Errorf("set DEMO_API_URL and DEMO_API_KEY")
	}
	c, err := client.NewClientWithResponses(base, client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}))
	if err != nil {
		return err
	}

	// A receiver on 127.0.0.1 (the server runs with
	// delivery.allow_private_networks) that records the event ids it gets.
	rcv, err := startReceiver()
	if err != nil {
		return err
	}
	defer rcv.srv.Close()
	wh, err := c.RegisterWebhookWithResponse(ctx, nil, client.WebhookCreate{
		Url: rcv.url,
		Events: []client.WebhookEvent{client.WebhookEventContactCreated, client.WebhookEventDemoCompleted,
			client.WebhookEventDemoAbandoned, client.WebhookEventLeadHot, client.WebhookEventMeetingBooked},
	})
	if err != nil {
		return err
	}
	if wh.JSON201 == nil || !strings.HasPrefix(wh.JSON201.Secret, "whsec_") {
		return fmt.Errorf("register webhook: %d %s", wh.StatusCode(), wh.Body)
	}
	webhookID := wh.JSON201.Id

	// An agent without status is active.
	agent, err := c.CreateAgentWithResponse(ctx, nil, client.AgentCreate{
		Name: "Ava", SandboxUrl: "https://sandbox.example.com/ava",
	})
	if err != nil {
		return err
	}
	if agent.JSON201 == nil || agent.JSON201.Status != client.Active {
		return fmt.Errorf("create agent: %d %s", agent.StatusCode(), agent.Body)
	}
	agentID := agent.JSON201.Id

	// Three sessions, each with a new contact: one completed hot, one
	// completed cold, one abandoned.
	var sessions []string
	run := rand.Text()[:10] // e-mails new to the account, so each captures a contact
	for i, name := range []string{"pat", "sam", "alex"} {
		email := name + "+" + run + "@example.com"
		s, err := c.StartSessionWithResponse(ctx, nil, client.SessionCreate{
			AgentId: agentID,
			Contact: &client.ContactCreate{Name: "Prospect " + name, Email: client.Email(email)},
		})
		if err != nil {
			return err
		}
		if s.JSON201 == nil || s.JSON201.Status != client.InProgress || s.JSON201.EndedAt != nil {
			return fmt.Errorf("start session %d: %d %s", i, s.StatusCode(), s.Body)
		}
		sessions = append(sessions, s.JSON201.Id)
	}
	signals := client.Signals{Interest: 80, Objections: 10, BuyingSignals: 90}
	for i, score := range []int{91, 40} {
		done, err := c.CompleteSessionWithResponse(ctx, sessions[i], nil, client.SessionComplete{
			IntentScore: score, Signals: signals, DurationSeconds: 600,
			ReplayUrl: fmt.Sprintf("https://replay.example.com/%d", i),
		})
		if err != nil {
			return err
		}
		if done.JSON200 == nil || done.JSON200.Status != client.Completed || done.JSON200.EndedAt == nil ||
			done.JSON200.ReplayUrl == nil || done.JSON200.IntentScore != score {
			return fmt.Errorf("complete session %d: %d %s", i, done.StatusCode(), done.Body)
		}
	}
	ab, err := c.AbandonSessionWithResponse(ctx, sessions[2], nil, client.SessionAbandon{})
	if err != nil {
		return err
	}
	if ab.JSON200 == nil || ab.JSON200.Status != client.Abandoned {
		return fmt.Errorf("abandon session: %d %s", ab.StatusCode(), ab.Body)
	}

	// Page through the agent's sessions one at a time by the Link header.
	var listed []string
	params := &client.ListSessionsParams{AgentId: &agentID, Limit: ptr(1)}
	for page := 0; ; page++ {
		if page > 10 {
			return fmt.Errorf("list sessions: more pages than sessions")
		}
		l, err := c.ListSessionsWithResponse(ctx, params)
		if err != nil {
			return err
		}
		if l.JSON200 == nil || len(l.JSON200.Data) != 1 {
			return fmt.Errorf("list sessions page %d: %d %s", page, l.StatusCode(), l.Body)
		}
		listed = append(listed, l.JSON200.Data[0].Id)
		next, err := nextCursor(l.HTTPResponse.Header.Get("Link"))
		if err != nil {
			return err
		}
		if next == "" {
			break
		}
		params = &client.ListSessionsParams{AgentId: &agentID, Limit: ptr(1), StartingAfter: &next}
	}
	slices.Reverse(sessions) // most recent first
	if !slices.Equal(listed, sessions) {
		return fmt.Errorf("paged sessions %v, want %v", listed, sessions)
	}

	// 3 contact.created, 2 demo.completed, 1 lead.hot, 1 demo.abandoned:
	// wait until all seven deliveries succeeded, reading them by pages of 3.
	const want = 7
	var deliveries []client.Delivery
	deadline := time.Now().Add(30 * time.Second)
	for {
		deliveries, err = allDeliveries(ctx, c, webhookID)
		if err != nil {
			return err
		}
		ok := len(deliveries) == want
		for _, d := range deliveries {
			ok = ok && d.Status == client.Succeeded && d.Attempts == 1
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deliveries after 30s: %+v", deliveries)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	var delivered []string
	for _, d := range deliveries {
		delivered = append(delivered, d.EventId)
	}
	slices.Sort(delivered)
	if got := rcv.ids(); !slices.Equal(got, delivered) {
		return fmt.Errorf("the receiver got events %v, the deliveries say %v", got, delivered)
	}

	// A 404 and a 400, read through the generated error types.
	nf, err := c.StartSessionWithResponse(ctx, nil, client.SessionCreate{
		AgentId: "agt_" + strings.Repeat("0", 26), ContactId: &sessionsContact,
	})
	if err != nil {
		return err
	}
	if nf.JSON404 == nil || nf.JSON404.Error.Code != client.NotFoundErrorDetailCodeNotFound ||
		nf.JSON404.Error.Message == "" || nf.JSON404.Error.Param == nil || *nf.JSON404.Error.Param != "agent_id" {
		return fmt.Errorf("start session with an unknown agent: %d %s", nf.StatusCode(), nf.Body)
	}
	bad, err := c.CreateAgentWithResponse(ctx, nil, client.AgentCreate{Name: "", SandboxUrl: "https://sandbox.example.com/x"})
	if err != nil {
		return err
	}
	if bad.JSON400 == nil || bad.JSON400.Error.Code != client.InvalidRequest ||
		bad.JSON400.Error.Message == "" || bad.JSON400.Error.Param == nil || *bad.JSON400.Error.Param != "name" {
		return fmt.Errorf("create agent with an empty name: %d %s", bad.StatusCode(), bad.Body)
	}
	fmt.Printf("404: %s (param %s); 400: %s (param %s)\n", nf.JSON404.Error.Message, *nf.JSON404.Error.Param,
		bad.JSON400.Error.Message, *bad.JSON400.Error.Param)
	return nil
}

// sessionsContact is a well-formed contact id; the unknown agent is found
// first.
var sessionsContact = "cnt_" + strings.Repeat("0", 26)

// allDeliveries reads a webhook's attempt log by pages of 3, following Link.
func allDeliveries(ctx context.Context, c *client.ClientWithResponses, webhookID string) ([]client.Delivery, error) {
	var all []client.Delivery
	params := &client.ListDeliveriesParams{Limit: ptr(3)}
	for page := 0; page < 10; page++ {
		l, err := c.ListDeliveriesWithResponse(ctx, webhookID, params)
		if err != nil {
			return nil, err
		}
		if l.JSON200 == nil {
			return nil, fmt.Errorf("list deliveries: %d %s", l.StatusCode(), l.Body)
		}
		all = append(all, l.JSON200.Data...)
		next, err := nextCursor(l.HTTPResponse.Header.Get("Link"))
		if err != nil || next == "" {
			return all, err
		}
		params = &client.ListDeliveriesParams{Limit: ptr(3), StartingAfter: &next}
	}
	return nil, fmt.Errorf("list deliveries: more than 10 pages")
}

// nextCursor returns starting_after of a Link: <…>; rel="next" header, or
// "" when there is none.
func nextCursor(link string) (string, error) {
	if link == "" {
		return "", nil
	}
	target, rel, ok := strings.Cut(link, ">;")
	if !ok || strings.TrimSpace(rel) != `rel="next"` || !strings.HasPrefix(target, "<") {
		return "", fmt.Errorf("link header %q", link)
	}
	u, err := url.Parse(target[1:])
	if err != nil {
		return "", err
	}
	cursor := u.Query().Get("starting_after")
	if cursor == "" {
		return "", fmt.Errorf("link header %q has no starting_after", link)
	}
	return cursor, nil
}

func ptr[T any](v T) *T { return &v }

// receiver records the X-Service-Event-Id of every POST it answers.
type receiver struct {
	srv *http.Server
	url string
	mu  sync.Mutex
	got map[string]bool
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/hook", got: map[string]bool{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got[req.Header.Get("X-Service-Event-Id")] = true
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *receiver) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
