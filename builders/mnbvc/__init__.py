"""MNBVC dialogue formats (多轮对话, 问答, 论坛)."""
