/**
 * Processes a test stops for real (SIGSTOP: a frozen VM, a debugger, a swapped-out server) and
 * continues again, each of them whatever happens: `continueAll` belongs in the file's `afterAll`.
 */
export function stoppedProcesses() {
  const stopped = new Set<number>();
  const cont = (pid: number): void => {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // Gone already: nothing left to continue.
    }
  };
  return {
    stop(pid: number): void {
      stopped.add(pid);
      process.kill(pid, 'SIGSTOP');
    },
    cont,
    continueAll(): void {
      for (const pid of stopped) cont(pid);
    },
  };
}
