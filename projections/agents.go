package projections

import (
	"context"
	"unicode/utf8"

	"demosvc/eventlog"
)

// AgentInput is the body of POST /v1/agents.
type AgentInput struct {
	Name       string  `json:"name"`
	SandboxURL string  `json:"sandbox_url"`
	Persona    *string `json:"persona"`
	Status     *string `json:"status"`
}

// AgentPatch is the body of PATCH /v1/agents/{id}: nil fields were not sent.
type AgentPatch struct {
	Name       *string
	SandboxURL *string
	Persona    *string
	Status     *string
}

func checkAgentStatus(v string) error {
	if v != AgentActive && v != AgentInactive {
		return ParamErrorf(EInvalid, "status", "must be active or inactive, got %q", v)
	}
	return nil
}

func checkPersona(v string) error {
	if len(v) > maxPersonaBytes {
		return ParamErrorf(EInvalid, "persona", "must be at most %d bytes", maxPersonaBytes)
	}
	if !utf8.ValidString(v) {
		return ParamErrorf(EInvalid, "persona", "must be valid UTF-8")
	}
	// A persona is a prompt: it keeps its lines, tabs and surrounding
	// space, but holds no other control or hiding character.
	return checkChars("persona", v, true)
}

// Validate checks a new agent's fields.
func (in *AgentInput) Validate() error {
	if err := checkText("name", in.Name, 1, maxNameChars); err != nil {
		return err
	}
	if err := checkURL("sandbox_url", in.SandboxURL); err != nil {
		return err
	}
	if in.Persona != nil {
		if err := checkPersona(*in.Persona); err != nil {
			return err
		}
	}
	if in.Status != nil {
		return checkAgentStatus(*in.Status)
	}
	return nil
}

// Validate checks the fields a patch sends.
func (p *AgentPatch) Validate() error {
	if p.Name != nil {
		if err := checkText("name", *p.Name, 1, maxNameChars); err != nil {
			return err
		}
	}
	if p.SandboxURL != nil {
		if err := checkURL("sandbox_url", *p.SandboxURL); err != nil {
			return err
		}
	}
	if p.Persona != nil {
		if err := checkPersona(*p.Persona); err != nil {
			return err
		}
	}
	if p.Status != nil {
		return checkAgentStatus(*p.Status)
	}
	return nil
}

// CreateAgent creates an agent in the caller's account.
func (p *Projections) CreateAgent(ctx context.Context, pr Principal, in AgentInput, idem *Idempotency) (any, error) {
	in.Name = TrimText(in.Name)
	if err := in.Validate(); err != nil {
		return nil, err
	}
	id := p.log.IDs().New(PrefixAgent)
	ev := &AgentCreated{AgentID: id, Name: in.Name, SandboxURL: in.SandboxURL, Status: AgentActive}
	if in.Persona != nil {
		ev.Persona = *in.Persona
	}
	if in.Status != nil {
		ev.Status = *in.Status
	}
	aid, _ := ParseID(PrefixAgent, id)
	return p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID, Idem: idem,
		Decide: func(s *State) ([]any, []eventlog.Put, error) { return []any{ev}, nil, nil },
		Result: func(s *State) any { return s.agents[aid].view(true) },
	})
}

// UpdateAgent changes the fields a patch sends; any sent field bumps
// updated_at, and an empty patch changes nothing. The result has no
// persona, as the seed's update response.
func (p *Projections) UpdateAgent(ctx context.Context, pr Principal, agentID string, patch AgentPatch) (AgentView, error) {
	id, ok := ParseID(PrefixAgent, agentID)
	if !ok {
		return AgentView{}, notFound("agent", agentID)
	}
	agentID = FormatID(PrefixAgent, id) // as the event and its webhooks name it, whatever case was sent
	if patch.Name != nil {
		name := TrimText(*patch.Name)
		patch.Name = &name
	}
	if err := patch.Validate(); err != nil {
		return AgentView{}, err
	}
	empty := patch == AgentPatch{}
	v, err := p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if _, ok := agentKind.in(s, pr.Account.ID, agentID); !ok {
				return nil, nil, notFound("agent", agentID)
			}
			if empty {
				return nil, nil, nil
			}
			return []any{&AgentUpdated{AgentID: agentID, Name: patch.Name, SandboxURL: patch.SandboxURL, Persona: patch.Persona, Status: patch.Status}}, nil, nil
		},
		Result: func(s *State) any { return s.agents[id].view(false) },
	})
	if err != nil {
		return AgentView{}, err
	}
	return v.(AgentView), nil
}

// Agent returns one agent of account, with its persona.
func (p *Projections) Agent(account, agentID string) (AgentView, error) {
	return one(p, agentKind, account, agentID, func(a *agent) AgentView { return a.view(true) })
}

// Agents lists the agents of account, most recent first.
func (p *Projections) Agents(account string, q ListQuery, status string) (Page[AgentView], error) {
	var keep func(*agent) bool
	if status != "" {
		if err := checkAgentStatus(status); err != nil {
			return Page[AgentView]{}, err
		}
		keep = func(a *agent) bool { return a.status() == status }
	}
	return page(p, agentKind, account, q, keep, func(a *agent) AgentView { return a.view(true) })
}
