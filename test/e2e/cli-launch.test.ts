import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/ports';

// bin/pipeline.mjs as `npx pipeline` runs it, with every module it loads recorded: it runs the
// built JavaScript (no TypeScript compiler at run time) and loads the AWS SDK only for --stack.

const bin = fileURLToPath(new URL('../../bin/pipeline.mjs', import.meta.url));
const recorder = fileURLToPath(new URL('../support/record-imports.mjs', import.meta.url));
let dir: string;
let server: Server;
let url: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cli-launch-'));
  // A source edited since the last build is built again by the first run: that one is not measured.
  expect((await pipeline(['--version'])).code).toBe(0);
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"tasks":{"approved":1}}\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

/** The environment without any AWS setting of this machine: each test names its own. */
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_')));

let runs = 0;
function pipeline(args: string[], env: Record<string, string> = {}) {
  const record = join(dir, `imports-${++runs}.txt`);
  return new Promise<{ code: number; stdout: string; stderr: string; loaded: string[] }>((resolve) => {
    execFile(
      process.execPath,
      ['--import', recorder, bin, ...args],
      {
        cwd: tmpdir(),
        env: { ...cleanEnv(), NO_COLOR: '1', RECORD_IMPORTS_TO: record, ...env },
        timeout: 120_000,
      },
      (error, stdout, stderr) => {
        let loaded: string[] = [];
        try {
          loaded = readFileSync(record, 'utf8').trim().split('\n');
        } catch {
          // Nothing imported at all: the assertions below say so.
        }
        resolve({ code: error ? Number(error.code ?? -1) : 0, stdout, stderr, loaded });
      },
    );
  });
}

const compiler = /\/node_modules\/(tsx|typescript|esbuild|get-tsconfig)\//;
const sdk = /\/node_modules\/@(aws-sdk|smithy)\//;

describe('bin/pipeline.mjs loads only what the command needs', () => {
  it('--help runs the built JavaScript: no TypeScript source, no compiler, no AWS SDK', async () => {
    const r = await pipeline(['--help']);

    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: pipeline/);
    expect(r.loaded.some((u) => u.endsWith('/dist/cli.mjs'))).toBe(true);
    expect(r.loaded.filter((u) => compiler.test(u) || /\.tsx?$/.test(u))).toEqual([]);
    expect(r.loaded.filter((u) => sdk.test(u))).toEqual([]);
  });

  it('status against a local server loads no AWS SDK either', async () => {
    const r = await pipeline(['--url', url, 'status', '-o', 'json']);

    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ tasks: { approved: 1 } });
    expect(r.loaded.filter((u) => sdk.test(u) || compiler.test(u))).toEqual([]);
  });

  it('--stack loads the CloudFormation client, without the SDK notice about Node versions', async () => {
    const closed = await freePort();

    const r = await pipeline(['--stack', 'ContentPipeline-sandbox', '--region', 'eu-west-1', 'status'], {
      AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'secret',
      AWS_ENDPOINT_URL_CLOUDFORMATION: `http://127.0.0.1:${closed}`,
      AWS_MAX_ATTEMPTS: '1',
      AWS_CONFIG_FILE: join(dir, 'none'),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'none'),
    });

    expect(r.code).toBe(1);
    expect(r.stderr).toContain('pipeline: cannot read stack ContentPipeline-sandbox');
    expect(r.loaded.some((u) => u.includes('/node_modules/@aws-sdk/client-cloudformation/'))).toBe(true);
    expect(r.stderr).not.toContain('NodeVersionSupportWarning');
  });

  it('--stack with no region anywhere exits 2 naming --region, AWS_REGION and AWS_PROFILE', async () => {
    const r = await pipeline(['--stack', 'ContentPipeline-sandbox', 'status'], {
      AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'secret',
      AWS_CONFIG_FILE: join(dir, 'none'),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'none'),
      AWS_EC2_METADATA_DISABLED: 'true',
    });

    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'pipeline: no AWS region for --stack: pass --region <region>, set AWS_REGION, or name a profile with a region (--profile or AWS_PROFILE)\nRun `pipeline status --help` for usage.\n',
    );
  });
});
