import { createServer } from 'node:net';

/** A free TCP port on loopback, chosen by the kernel (so leftovers of a killed run never collide). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Why nothing can listen on `port` at `host` now (EADDRINUSE, EACCES), or undefined when it can:
 * `npm start` asks before it creates and migrates PostgreSQL, which takes seconds, so a taken
 * port fails the start at once. The port is released again at once; a server that takes it in
 * between still fails the start, later, with the same message.
 */
export function portUnavailable(port: number, host: string): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/** The message for a port `npm start` cannot listen on: names PORT, the setting that moves it. */
export function portMessage(port: number, host: string, code: string | undefined): string {
  const why = code === 'EADDRINUSE' ? 'is in use' : `cannot be listened on (${code ?? 'unknown error'})`;
  return (
    `port ${port} on ${host} ${why}: stop what uses it, or start on another port with PORT, ` +
    `e.g. PORT=${port === 65535 ? 3001 : port + 1} npm start (and the same PORT for npx pipeline)`
  );
}
