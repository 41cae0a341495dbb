import { type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * What every local HTTP endpoint shares: reading a body without ever holding more than the
 * limit, and JSON answers for what node:http refuses itself (a malformed request, headers too
 * large). node:http has no body limit of its own, and its built-in 400/431 answers are bare.
 */

/** The body went past the limit: refused while it was still arriving. */
export class BodyTooLargeError extends Error {
  override readonly name = 'BodyTooLargeError';
  constructor(readonly maxBytes: number) {
    super(`request body is larger than ${maxBytes} bytes`);
  }
}

/**
 * Reads `req`'s body, rejecting with BodyTooLargeError as soon as the declared length or the
 * bytes received pass `maxBytes` (the rest is never read: answer with {@link sendAndClose}).
 * Event listeners rather than `for await`: leaving an async iteration early destroys the
 * socket, and with it the chance to answer.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) {
      req.pause();
      reject(new BodyTooLargeError(maxBytes));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.off('data', onData);
        req.pause();
        chunks.length = 0;
        reject(new BodyTooLargeError(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}

/**
 * Answers and then closes the connection: used when the request body was not read to its end,
 * so the socket cannot carry another request.
 */
export function sendAndClose(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string,
): void {
  res.shouldKeepAlive = false;
  res.writeHead(status, {
    ...headers,
    connection: 'close',
    'content-length': String(Buffer.byteLength(body)),
  });
  res.end(body, () => res.socket?.destroy());
}

/**
 * Replaces node:http's bare 400/408/431 answers (a request line or headers it cannot parse, a
 * request not sent within the server's timeouts, headers over its limit) with the same answer
 * carrying a JSON body of `errorBody(status, message)`.
 */
export function answerClientErrorsAsJson(
  server: Server,
  errorBody: (status: number, message: string) => unknown,
): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status =
      err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const message =
      status === 431
        ? 'request headers are too large'
        : status === 408
          ? 'the request was not sent in time'
          : `malformed HTTP request (${err.code ?? err.message})`;
    // Ended by a newline, as every JSON answer of the local server.
    const body = `${JSON.stringify(errorBody(status, message))}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
}
