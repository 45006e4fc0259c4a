"""hylens beside other threads and processes: a daemon thread still in a call when Python exits,
a child forked while another thread runs a forward, Ctrl-C in a child forked from a thread that
is not the main one. Each runs in its own interpreter (a subprocess), since what it checks is
how that interpreter ends; a hang is a failure (the timeouts are far above the seconds each
takes)."""

import os
import subprocess
import sys
import textwrap

from conftest import SOURCE_DIR

MODEL = str(SOURCE_DIR / "models" / "qwen35-tiny")


def run_python(code, timeout=120, threads="2"):
    env = dict(os.environ, HYLENS_THREADS=threads)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_a_daemon_thread_in_a_call_at_exit_does_not_abort_the_process():
    """Re-taking the GIL during finalization ends the thread by unwinding it; through pybind11's
    noexcept gil_scoped_release that was std::terminate: exit status 134, 'terminate called
    without an active exception'."""
    code = f"""
        import threading, time, numpy as np, hylens
        m = hylens.load({MODEL!r})
        ids = np.arange(200) % 1536
        def loop():
            while True:
                m.forward(ids)
        threading.Thread(target=loop, daemon=True).start()
        time.sleep(0.5)
        print("main done")
    """
    for _ in range(3):
        r = run_python(code)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "main done" in r.stdout and "terminate" not in r.stderr


def test_a_child_forked_while_another_thread_runs_a_forward_runs_its_own():
    """Only the forking thread lives on in the child: the pool's region lock, held by the thread
    in its forward, was held for ever and the child's first forward hung; a child that then ended
    normally hung in the pool's destructor (its condition variables waited for the parent's
    workers)."""
    code = f"""
        import os, sys, threading, time, numpy as np, hylens
        m = hylens.load({MODEL!r})
        ids = (np.arange(2 * 600) % 1536).reshape(2, 600)
        want = m.forward(ids)
        stop = False
        def loop():
            while not stop:
                m.forward(ids)
        t = threading.Thread(target=loop)
        t.start()
        hung = 0
        for _ in range(4):
            time.sleep(0.2)
            pid = os.fork()
            if pid == 0:  # sys.exit, not os._exit: the child ends as a script does, destructors and all
                sys.exit(0 if (m.forward(ids) == want).all() else 3)
            for _ in range(300):  # 30 s
                got, status = os.waitpid(pid, os.WNOHANG)
                if got:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                hung += 1
                continue
            assert os.waitstatus_to_exitcode(status) == 0, status
        stop = True
        t.join()
        print("hung", hung)
    """
    r = run_python(code, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "hung 0" in r.stdout, r.stdout


def test_ctrl_c_stops_a_call_in_a_child_forked_from_a_worker_thread():
    """The forking thread is the child's main thread; the check kept the parent's main thread
    and never ran, so a long generate ran to its end (two minutes here) before its
    KeyboardInterrupt."""
    code = f"""
        import _thread, os, threading, time, hylens
        m = hylens.load({MODEL!r})
        def child():
            threading.Timer(0.5, _thread.interrupt_main).start()
            t0 = time.monotonic()
            try:
                m.generate([1, 2, 3], max_new=100000)
            except KeyboardInterrupt:  # 0.5 s and a check later; the whole generate takes minutes
                os._exit(0 if time.monotonic() - t0 < 20 else 4)
            os._exit(5)
        def fork_here():
            pid = os.fork()
            if pid == 0:
                child()
            print("child status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
        w = threading.Thread(target=fork_here)
        w.start()
        w.join()
    """
    r = run_python(code, timeout=300, threads="1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "child status 0" in r.stdout, r.stdout + r.stderr[-2000:]
