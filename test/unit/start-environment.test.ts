import { describe, expect, it } from 'vitest';
import { parseStartEnvironment } from '../../infra/local/start-environment';
import { PipelineError } from '../../shared/errors';

describe("npm start's environment", () => {
  it('takes the defaults when nothing is set', () => {
    expect(parseStartEnvironment({})).toEqual({
      PORT: 3000,
      PIPELINE_DATA_DIR: './.pipeline',
      PIPELINE_DYNAMO: 'dynalite',
      PIPELINE_FAULTS: undefined,
      PIPELINE_FAULT_SEED: undefined,
    });
  });

  it('reads a blank variable as unset, as the ops CLI reads PORT (a blank PORT was port 0, a random one)', () => {
    const blank = {
      PORT: '',
      PIPELINE_DATA_DIR: ' ',
      PIPELINE_DYNAMO: '',
      PIPELINE_FAULTS: '',
      PIPELINE_FAULT_SEED: '',
      PIPELINE_CALLER: '  ',
    };

    expect(parseStartEnvironment(blank)).toEqual(parseStartEnvironment({}));
  });

  it('reads PIPELINE_CALLER, the identity the local server records as reviewer, trimmed', () => {
    expect(parseStartEnvironment({ PIPELINE_CALLER: ' rita ' }).PIPELINE_CALLER).toBe('rita');
    expect(parseStartEnvironment({}).PIPELINE_CALLER).toBeUndefined();
    expect(() => parseStartEnvironment({ PIPELINE_CALLER: 'x'.repeat(201) })).toThrow(PipelineError);
  });

  it('refuses a bad value with a CONFIG error naming each variable', () => {
    const err = (() => {
      try {
        parseStartEnvironment({ PORT: '70000', PIPELINE_DYNAMO: 'cassandra' });
      } catch (e) {
        return e;
      }
    })();

    expect(err).toBeInstanceOf(PipelineError);
    expect(err).toMatchObject({ code: 'CONFIG' });
    expect((err as PipelineError).details.fields).toEqual([
      expect.objectContaining({ path: 'PORT' }),
      expect.objectContaining({ path: 'PIPELINE_DYNAMO' }),
    ]);
  });
});
