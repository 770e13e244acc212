"""Chat templates that render tools, tool calls and tool results as two families of real models do,
on the tiny checkpoint's ChatML tokens: the `<tool_call>` form (Hermes 2 Pro, Qwen2.5) and the
Llama 3.1 JSON form (`Environment: ipython`, `<|python_tag|>`, the `ipython` role). Written into a
checkpoint's `chat_template.jinja`, they let a server infer its tool-call parser from the
template, and show that calls and results of a conversation render."""

from __future__ import annotations

from pathlib import Path

_TURNS_END = "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

HERMES_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nYou may call these functions:\n<tools>\n"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n"
    'Call one as <tool_call>\n{"name": <name>, "arguments": <arguments object>}\n</tool_call><|im_end|>\n'
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant\n{{ message.content }}"
    "{% for call in message.tool_calls %}<tool_call>\n"
    '{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}\n</tool_call>\n'
    "{% endfor %}<|im_end|>\n"
    "{% elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n"
    "</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}" + _TURNS_END
)

LLAMA3_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nEnvironment: ipython\n"
    'To call a function, answer with {"name": function name, "parameters": arguments object}.\n'
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant\n<|python_tag|>"
    "{% for call in message.tool_calls %}"
    '{"name": "{{ call.function.name }}", "parameters": {{ call.function.arguments | tojson }}}'
    "{% if not loop.last %}; {% endif %}"
    "{% endfor %}<|im_end|>\n"
    "{% elif message.role == 'tool' %}<|im_start|>ipython\n{{ message.content }}<|im_end|>\n"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}" + _TURNS_END
)


def with_chat_template(checkpoint: Path, template: str) -> Path:
    """`checkpoint` with its tokenizer's chat template replaced by `template`."""
    (checkpoint / "chat_template.jinja").write_text(template)
    return checkpoint
