"""`loo_adapt.stan.interrupts.signals_not_lost`: a signal a native call's own handler takes and
drops (as stanli's does when it lands after the sampler's last poll) still stops the run."""

import signal
import socket
import threading

import pytest

from loo_adapt.stan.interrupts import signals_not_lost


def _to_main_thread(signum):
    """The signal, delivered to the main thread: sent to the process, it may land in another
    thread (dask's, numba's), and CPython then runs the Python handler only when the main
    thread next recomputes its pending work, possibly after the block under test."""
    signal.pthread_kill(threading.main_thread().ident, signum)


def _dropping_call(signum):
    """What stanli's sampler does when a signal lands after its last poll: its own handler
    records the signal, the handler in force before is restored, the call returns normally."""
    seen = []
    previous = signal.signal(signum, lambda s, f: seen.append(s))
    try:
        _to_main_thread(signum)
    finally:
        signal.signal(signum, previous)
    return seen


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_dropped_signal_is_raised_after_the_call(signum):
    # without the guard the signal is recorded and the call returns: the run would go on
    assert _dropping_call(signum) == [signum]
    with pytest.raises(KeyboardInterrupt):
        with signals_not_lost():
            assert _dropping_call(signum) == [signum]


def test_nothing_is_raised_without_a_signal_and_one_interrupt_is_not_doubled():
    with signals_not_lost():
        x = 1
    assert x == 1
    # a signal Python's own handler turns into KeyboardInterrupt propagates once, as it is
    # (installed here: an earlier test or plugin may have left another handler in force)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            with signals_not_lost():
                _to_main_thread(signal.SIGINT)
                signal.getsignal(signal.SIGINT)  # bytecode after the signal: the handler runs
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "native sampler" not in str(info.value)


def test_other_signals_do_not_stop_the_run():
    seen = []
    previous = signal.signal(signal.SIGUSR1, lambda s, f: seen.append(s))
    try:
        with signals_not_lost():
            _to_main_thread(signal.SIGUSR1)
            signal.getsignal(signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seen == [signal.SIGUSR1]


def test_an_existing_wakeup_fd_is_restored_and_sees_the_signal():
    # an asyncio loop (a notebook kernel) owns a wake-up descriptor: it must get every byte
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    before = signal.set_wakeup_fd(writer.fileno())
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_not_lost():
                _dropping_call(signal.SIGINT)
        assert signal.set_wakeup_fd(writer.fileno()) == writer.fileno()
        assert reader.recv(16) == bytes([signal.SIGINT])
    finally:
        signal.set_wakeup_fd(before)
        reader.close()
        writer.close()
    assert signal.set_wakeup_fd(-1) == before
    signal.set_wakeup_fd(before)

