"""mqs for debuggers' Python: mqs's host, the library host/mqs-debugger
builds, bound with ctypes (host.py), the DLL kept in a helper process
(isolate.py), and the `mpi queues` command (command.py).
debuggers/gdb/mqs.py and debuggers/lldb/mqs.py plug a debugger in."""
