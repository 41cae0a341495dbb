import { createServer } from 'node:net';

/** The local server's port when PORT is unset (`npm start`), and where the ops CLI looks for it. */
export const defaultPort = 3000;

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
