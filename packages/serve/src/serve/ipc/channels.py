"""The ZMQ ipc pipes between processes: addresses, and typed send/receive over PUSH/PULL.

The receiving end of a pipe binds, senders connect; ZMQ queues a connect made before the bind.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import msgspec
import zmq
import zmq.asyncio

from serve.ipc.messages import Message

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)


class Addresses(msgspec.Struct, frozen=True, kw_only=True):
    """The ipc endpoint of each receiving process: the first rank of each data-parallel replica
    (its scheduler), the detokenizer and the tokenizer manager."""

    schedulers: tuple[str, ...]
    detokenizer: str
    tokenizer: str

    @classmethod
    def fresh(cls, replicas: int = 1) -> Addresses:
        """New endpoints in a private temporary folder (unique per launch), one per replica's scheduler."""
        folder = tempfile.mkdtemp(prefix="serve-ipc-")

        def at(name: str) -> str:
            return f"ipc://{os.path.join(folder, name)}"

        return cls(
            schedulers=tuple(at(f"scheduler-{replica}") for replica in range(replicas)),
            detokenizer=at("detokenizer"),
            tokenizer=at("tokenizer"),
        )

    def folder(self) -> str:
        """The temporary folder holding the socket files."""
        return os.path.dirname(self.tokenizer.removeprefix("ipc://"))


def encode(message: Message) -> bytes:
    """The msgpack bytes of one message."""
    return _encoder.encode(message)


def decode(data: bytes) -> Message:
    """The message in `data` (the struct tag picks its type)."""
    return _decoder.decode(data)


def _socket(context: Any, kind: int, address: str, bind: bool) -> Any:
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    if bind:
        sock.bind(address)
    else:
        sock.connect(address)
    return sock


class Receiver:
    """The PULL end of a pipe, bound at `address`."""

    def __init__(self, context: zmq.Context[Any], address: str) -> None:
        self.socket: zmq.Socket[Any] = _socket(context, zmq.PULL, address, bind=True)

    def poll(self, timeout_ms: int) -> bool:
        """Whether a message is waiting, after waiting at most `timeout_ms`."""
        return bool(self.socket.poll(timeout_ms, zmq.POLLIN))

    def drain(self) -> list[Message]:
        """Every message waiting now, without blocking."""
        found: list[Message] = []
        # Asking the socket's events is cheaper than the zmq.Again a non-blocking recv raises at
        # the end: the detokenizer drains once per token of every stream.
        while self._readable():
            found.append(decode(self.socket.recv(zmq.NOBLOCK)))
        return found

    def _readable(self) -> bool:
        """Whether a message is waiting (ZMQ_EVENTS is an int option; pyzmq types every option's value
        as int, bytes or str)."""
        events = self.socket.getsockopt(zmq.EVENTS)
        return isinstance(events, int) and bool(events & zmq.POLLIN)


class Sender:
    """The PUSH end of a pipe, connected to `address`."""

    def __init__(self, context: zmq.Context[Any], address: str) -> None:
        self.socket: zmq.Socket[Any] = _socket(context, zmq.PUSH, address, bind=False)

    def send(self, message: Message) -> None:
        """Queue one message (never blocks: the pipe has no high-water mark)."""
        self.socket.send(encode(message), copy=False)


class AsyncReceiver:
    """The PULL end of a pipe for an asyncio loop."""

    def __init__(self, context: zmq.asyncio.Context, address: str) -> None:
        self.socket: zmq.asyncio.Socket = _socket(context, zmq.PULL, address, bind=True)

    async def receive(self) -> Message:
        """The next message (waits for it)."""
        return decode(await self.socket.recv())


class AsyncSender:
    """The PUSH end of a pipe for an asyncio loop (sends never wait: no high-water mark)."""

    def __init__(self, context: zmq.asyncio.Context, address: str) -> None:
        self.socket: zmq.asyncio.Socket = _socket(context, zmq.PUSH, address, bind=False)

    def send(self, message: Message) -> None:
        """Queue one message."""
        self.socket.send(encode(message), copy=False, flags=zmq.NOBLOCK)
