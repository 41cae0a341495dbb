import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { quietSdkNodeVersionWarning, supportedNodeMajor } from '../../shared/sdk-warnings';

const flag = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

describe("the AWS SDK's Node-version notice", () => {
  it('is switched off on the Node majors the project supports, and only there', () => {
    for (const [version, expected] of [
      ['20.20.2', 'true'],
      ['22.12.0', 'true'],
      ['18.20.0', undefined],
    ] as const) {
      const env: NodeJS.ProcessEnv = {};
      quietSdkNodeVersionWarning(env, version);
      expect(env[flag], version).toBe(expected);
    }
  });

  it("keeps the user's own setting", () => {
    const env: NodeJS.ProcessEnv = { [flag]: 'false' };

    quietSdkNodeVersionWarning(env, '20.0.0');

    expect(env[flag]).toBe('false');
  });

  it("supports what package.json's engines say", () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));

    expect(pkg.engines.node).toBe(`>=${supportedNodeMajor}`);
  });
});
