"""The contracts the runtime's outside implements or uses: the agent port transports hold,
the model, tools, storage, environment, permission and question ports, the observer port
tracing and metrics watch turns through, and what a turn engine that drives another agent
tells the port."""
