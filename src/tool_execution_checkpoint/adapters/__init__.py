"""Adapters that guard the tools of agent frameworks, each an optional extra.

Each module builds on :func:`tool_execution_checkpoint.checkpointed` and
:class:`tool_execution_checkpoint.ToolGuard` only, and derives the call id the way its
framework's identity survives a retry or a resume.
"""
