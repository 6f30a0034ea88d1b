"""What happens between a model's tool call and the result it sees: the turn's tool batch
(check, run, log each call), the permission decision for one call (remembered answers, the
policy's verdict, asking the client), an `ask_user` call's question and answer, the gate
that asks guards and hooks about every call, durable approvals and the command shapes an
'always allow' covers, the per-result bound that keeps one result from flooding the context,
and the exposure tiers that decide which tools a step offers."""
