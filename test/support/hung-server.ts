import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP server on loopback that reads each request and never answers it: a downstream that
 * hangs. `requests` counts the attempts that reached it; `close` ends every held connection.
 */
export interface HungServer {
  readonly endpoint: string;
  readonly requests: () => number;
  close(): Promise<void>;
}

export async function startHungServer(): Promise<HungServer> {
  let requests = 0;
  const held = new Set<IncomingMessage>();
  const server: Server = createServer((req) => {
    requests += 1;
    held.add(req);
    req.resume();
    req.on('close', () => held.delete(req));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests: () => requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
