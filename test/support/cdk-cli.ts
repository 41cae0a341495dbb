import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** One annotation the app left in the cloud assembly (`aws:cdk:error`, `aws:cdk:warning`, …). */
export interface AssemblyAnnotation {
  readonly level: 'error' | 'warning' | 'info';
  readonly path: string;
  readonly message: string;
}

/** What `npx cdk synth` did: its exit, its output, and the assembly it wrote. */
export interface CliSynth {
  readonly command: string;
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** The cloud assembly directory the CLI wrote (`--output`). */
  readonly outdir: string;
  /** The one stack of the assembly. */
  readonly stackName: string;
  /** Every annotation of every artifact, as `cdk synth` would print it. */
  readonly annotations: readonly AssemblyAnnotation[];
  /** The stack's template, as CloudFormation would receive it. */
  template<T = unknown>(): T;
  /** Removes the assembly directory. */
  remove(): void;
}

/**
 * The environment of a user at a terminal, less what this process may carry: no AWS or CDK
 * variable the test does not set, so "as today" means no credentials and no region.
 */
function userEnvironment(extra: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(AWS_|CDK_)/.test(key) || key.startsWith('npm_') || key === 'VITEST' || key === 'NODE_ENV')
      continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

interface ManifestJson {
  readonly artifacts?: Record<
    string,
    {
      readonly type: string;
      readonly properties?: { readonly templateFile?: string };
      readonly metadata?: Record<string, readonly { readonly type: string; readonly data?: unknown }[]>;
    }
  >;
}

/**
 * Runs the cdk CLI binary itself, `npx cdk synth <args>`, from the project's root as a user
 * types it, writing its assembly to a fresh temporary directory (`--output`, so runs beside each
 * other never share `cdk.out`). `env` adds variables a user may have (`CDK_DEFAULT_REGION`…);
 * nothing else of this process's AWS or CDK environment is passed on. Never throws on the
 * CLI's failure: the caller reads `code` and `annotations`.
 */
export function cdkCliSynth(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Promise<CliSynth> {
  const outdir = mkdtempSync(join(tmpdir(), 'content-pipeline-cdk-cli-'));
  const argv = ['cdk', 'synth', ...args, '--output', outdir];
  const command = [...Object.entries(env).map(([k, v]) => `${k}=${v}`), 'npx', ...argv].join(' ');
  return new Promise((resolve) => {
    execFile(
      'npx',
      argv,
      // A bound on a hang: a synth with its bundles takes 10-20 s, a minute beside other suites.
      { cwd: root, env: userEnvironment(env), timeout: 540_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        let manifest: ManifestJson = {};
        try {
          manifest = JSON.parse(readFileSync(join(outdir, 'manifest.json'), 'utf8')) as ManifestJson;
        } catch {
          // No assembly: the app failed before writing one; `code` and stderr say why.
        }
        const artifacts = Object.entries(manifest.artifacts ?? {});
        const stacks = artifacts.filter(([, a]) => a.type === 'aws:cloudformation:stack');
        const annotations = artifacts.flatMap(([, a]) =>
          Object.entries(a.metadata ?? {}).flatMap(([path, entries]) =>
            entries
              .filter((m) => /^aws:cdk:(error|warning|info)$/.test(m.type))
              .map((m) => ({
                level: m.type.slice('aws:cdk:'.length) as AssemblyAnnotation['level'],
                path,
                message: typeof m.data === 'string' ? m.data : JSON.stringify(m.data),
              })),
          ),
        );
        const [stackName = '', stack] = stacks[0] ?? [];
        resolve({
          command,
          code,
          stdout: String(stdout),
          stderr: String(stderr),
          outdir,
          stackName,
          annotations,
          template<T>() {
            const file = stack?.properties?.templateFile;
            if (!file)
              throw new Error(`${command} wrote no stack template (exit ${code}): ${String(stderr)}`);
            return JSON.parse(readFileSync(join(outdir, file), 'utf8')) as T;
          },
          remove: () => rmSync(outdir, { recursive: true, force: true }),
        });
      },
    );
  });
}
