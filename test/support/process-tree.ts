import { readdirSync, readFileSync } from 'node:fs';

/**
 * The processes of this machine as `/proc` shows them (Linux), for tests that kill a process
 * tree at a chosen moment or check that a stop left nothing running.
 */

/** One process: its id, its parent's, and its command line (arguments joined by spaces). */
export interface ProcessInfo {
  readonly pid: number;
  readonly ppid: number;
  readonly command: string;
}

/** Every process now; one that ends while it is read is left out. */
export function processes(): ProcessInfo[] {
  const out: ProcessInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name in parentheses may hold spaces: fields after its last ')' are fixed.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      out.push({ pid: Number(entry), ppid, command });
    } catch {
      // It ended between the listing and the read.
    }
  }
  return out;
}

/** `root` and its descendants among `all`, parents before their children. */
export function treeOf(root: number, all: readonly ProcessInfo[] = processes()): ProcessInfo[] {
  const children = new Map<number, ProcessInfo[]>();
  for (const p of all) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const self = all.find((p) => p.pid === root);
  const out: ProcessInfo[] = self ? [self] : [];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]?.pid ?? -1) ?? []));
  return out;
}

/** Whether `pid` is a live process (a zombie counts as gone: it runs nothing). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

const signal = (pid: number, sig: NodeJS.Signals) => {
  try {
    process.kill(pid, sig);
  } catch {
    // Gone already.
  }
};

/**
 * SIGKILLs `roots` and every descendant, as a container stop or the OOM killer ends a process
 * tree: each process is first stopped (SIGSTOP) so none forks or exits in between, until the
 * tree is whole, then all are killed at once. Processes that left the tree by their own
 * `setsid` (PostgreSQL's postmaster) are still its descendants, and are killed too. Returns the
 * processes killed.
 */
export function killTree(...roots: number[]): ProcessInfo[] {
  const stopped = new Map<number, ProcessInfo>();
  for (;;) {
    const all = processes();
    // The roots' trees, and the trees of processes already stopped: a child forked just
    // before its parent's stop joins them.
    const fresh = new Map<number, ProcessInfo>();
    for (const root of [...roots, ...stopped.keys()]) {
      for (const p of treeOf(root, all)) if (!stopped.has(p.pid)) fresh.set(p.pid, p);
    }
    if (fresh.size === 0) break;
    for (const p of fresh.values()) {
      signal(p.pid, 'SIGSTOP');
      stopped.set(p.pid, p);
    }
  }
  for (const pid of stopped.keys()) signal(pid, 'SIGKILL');
  return [...stopped.values()];
}
