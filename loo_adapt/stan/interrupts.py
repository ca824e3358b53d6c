"""Ctrl-C and SIGTERM during a native sampler call are never lost.

stanli answers Ctrl-C during its native sampler with a handler of its own that records the
signal and a poll the sampler calls between iterations; it raises ``KeyboardInterrupt`` only
when the sampler reports that it stopped.  A signal that lands after the sampler's last poll
(the end of a short fit: measured on the refits of a 54-observation logistic regression, a
third of the signals sent at random during the refits) is recorded and then dropped: the
call returns normally and the run goes on as if nothing had been pressed.  SIGTERM, which the
CLI answers through the SIGINT handler in force, is dropped the same way.

:func:`signals_not_lost` wraps such a call.  It watches, through Python's signal wake-up file
descriptor (`signal.set_wakeup_fd`, which the interpreter writes for every signal it catches
whatever the handler), which signals arrived during the call, and raises
``KeyboardInterrupt`` after a call that returned normally although SIGINT or SIGTERM arrived.
A wake-up descriptor already set (an asyncio event loop, a notebook kernel) is restored and
given the bytes read, so its owner sees every signal as before.  Off the main thread (where
no handler runs) it does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading

__all__ = ["signals_not_lost"]

_STOPPING = frozenset({int(signal.SIGINT), int(signal.SIGTERM)})


def _drain(sock) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def signals_not_lost():
    """Raise ``KeyboardInterrupt`` after the block when SIGINT or SIGTERM arrived during it
    and nothing was raised (a native call's own handler took the signal and dropped it).

    Examples
    --------
    >>> with signals_not_lost():
    ...     pass
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except (ValueError, OSError):  # the interpreter refuses: nothing to watch with
        reader.close()
        writer.close()
        yield
        return
    raised = False
    try:
        yield
    except BaseException:
        raised = True
        raise
    finally:
        signal.set_wakeup_fd(previous)
        seen = _drain(reader)
        reader.close()
        writer.close()
        if previous != -1 and seen:
            with contextlib.suppress(OSError):  # the owner's buffer is full or closed
                os.write(previous, seen)
        if not raised and _STOPPING.intersection(seen):
            raise KeyboardInterrupt(
                "a signal arrived during a native sampler call that did not stop on it")
