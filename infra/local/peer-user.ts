import { readFile } from 'node:fs/promises';
import { isIPv4, isIPv6 } from 'node:net';
import { endianness } from 'node:os';

/**
 * Which OS user holds the other end of a loopback TCP connection, as identd answers it and as
 * PostgreSQL's `peer` authentication does for a Unix socket: the kernel lists every TCP socket
 * of this network namespace with its owner's uid in `/proc/net/tcp` and `/proc/net/tcp6`, and
 * the client's socket is the one whose local address is the connection's remote end and whose
 * remote address is this server's. No client sends anything for it, so `curl` as written in the
 * README is identified as well as the CLI or a browser.
 *
 * Linux only: elsewhere (or with /proc hidden) there is no such list, and the answer is
 * `undefined`, as it is for a socket already gone.
 */

/** `/proc/net/tcp{,6}` print each 32-bit word of an address as the host's integer, in hex. */
function words(bytes: readonly number[]): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 4) {
    const word = bytes.slice(i, i + 4);
    const ordered = endianness() === 'LE' ? word.reverse() : word;
    out += ordered.map((b) => b.toString(16).padStart(2, '0')).join('');
  }
  return out.toUpperCase();
}

const ipv4Bytes = (address: string) => address.split('.').map(Number);

function ipv6Bytes(address: string): number[] {
  const [head = '', tail] = address.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  let left = groups(head);
  let right = tail === undefined ? [] : groups(tail);
  const last = (tail === undefined ? left : right).at(-1) ?? '';
  let v4: number[] = [];
  if (isIPv4(last)) {
    v4 = ipv4Bytes(last);
    if (tail === undefined) left = left.slice(0, -1);
    else right = right.slice(0, -1);
  }
  const fill = 8 - v4.length / 2 - left.length - right.length;
  const all = [...left, ...Array.from({ length: tail === undefined ? 0 : fill }, () => '0'), ...right];
  return [...all.flatMap((g) => [Number.parseInt(g, 16) >> 8, Number.parseInt(g, 16) & 0xff]), ...v4];
}

/** How an address and port appear in the table of `/proc/net/tcp` or `/proc/net/tcp6`. */
function encoded(address: string, port: number): { tcp?: string; tcp6: string } {
  const portHex = port.toString(16).toUpperCase().padStart(4, '0');
  const plain = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  if (isIPv4(plain)) {
    // An IPv4 connection is in `tcp`, or in `tcp6` as a v4-mapped address (a dual-stack socket).
    const mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...ipv4Bytes(plain)];
    return { tcp: `${words(ipv4Bytes(plain))}:${portHex}`, tcp6: `${words(mapped)}:${portHex}` };
  }
  if (!isIPv6(address)) throw new TypeError(`not an IP address: ${address}`);
  return { tcp6: `${words(ipv6Bytes(address))}:${portHex}` };
}

/** The connection states whose line still names the socket's owner (TIME_WAIT and CLOSE say uid 0). */
const timeWait = '06';
const closed = '07';

/** The uid on the line of `table` whose local and remote addresses are `local` and `remote`. */
function uidIn(table: string, local: string, remote: string): number | undefined {
  // Found by its text rather than by splitting every line: the table lists every TCP socket of
  // the machine's namespace, thousands on a busy one.
  const needle = ` ${local} ${remote} `;
  for (let at = table.indexOf(needle); at >= 0; at = table.indexOf(needle, at + needle.length)) {
    const end = table.indexOf('\n', at);
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
    const fields = table
      .slice(at, end < 0 ? undefined : end)
      .trim()
      .split(/\s+/);
    if (fields[2] === timeWait || fields[2] === closed) continue;
    const uid = Number(fields[6]);
    if (Number.isInteger(uid)) return uid;
  }
  return undefined;
}

/** The two ends of a TCP connection as the server's socket sees them. */
export interface ConnectionEnds {
  readonly localAddress?: string;
  readonly localPort?: number;
  readonly remoteAddress?: string;
  readonly remotePort?: number;
}

/** Reads a table of the kernel's TCP sockets; a test passes its own. */
export type TcpTableReader = (name: 'tcp' | 'tcp6') => Promise<string>;

const procTables: TcpTableReader = (name) => readFile(`/proc/net/${name}`, 'utf8');

/**
 * The uid of the OS user whose socket is the client end of `connection` (a loopback TCP
 * connection accepted by this process), or undefined when no table of this machine names it.
 */
export async function peerUid(
  connection: ConnectionEnds,
  read: TcpTableReader = procTables,
): Promise<number | undefined> {
  const { localAddress, localPort, remoteAddress, remotePort } = connection;
  if (!localAddress || !localPort || !remoteAddress || !remotePort) return undefined;
  // The client's socket: its local end is our remote one, and the other way round.
  const client = encoded(remoteAddress, remotePort);
  const server = encoded(localAddress, localPort);
  for (const name of ['tcp', 'tcp6'] as const) {
    const local = name === 'tcp' ? client.tcp : client.tcp6;
    const remote = name === 'tcp' ? server.tcp : server.tcp6;
    if (local === undefined || remote === undefined) continue;
    let table: string;
    try {
      table = await read(name);
    } catch {
      continue; // no such table here (no /proc, IPv6 off)
    }
    const uid = uidIn(table, local, remote);
    if (uid !== undefined) return uid;
  }
  return undefined;
}
