"""Validators: grade someone else's ACP client, ACP agent or AG-UI endpoint.

`ClientValidator` is a reference ACP agent that walks a connected client through every
feature it advertised (`steerable-bridge acp --validate-client`); `check_acp_agent` spawns
an ACP agent and runs the agent-side rules (`steerable-bridge check acp -- CMD`);
`check_agui_endpoint` POSTs a run to an AG-UI endpoint and checks the stream
(`steerable-bridge check agui URL`). Each produces a `Report` of `Check`s that renders as a
summary table, JSON or JUnit XML.
"""

from steerable_bridge.conformance.validators.acp_client import ClientValidator
from steerable_bridge.conformance.validators.client_session import ValidatorSettings
from steerable_bridge.conformance.validators.report import Check, Report, write_report

__all__ = ["Check", "ClientValidator", "Report", "ValidatorSettings", "write_report"]
