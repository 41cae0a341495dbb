import { describe, expect, it } from 'vitest';
import {
  FaultInjector,
  type FaultRates,
  noFaults,
  parseFaults,
  seededRandom,
} from '../../infra/local/faults';

describe('parseFaults', () => {
  it('parses the documented example into every rate', () => {
    expect(
      parseFaults('busReject=0.1,busAckLoss=0.05,busDuplicate=0.1,effectFailBefore=0.1,effectFailAfter=0.05'),
    ).toEqual({
      busReject: 0.1,
      busAckLoss: 0.05,
      busDuplicate: 0.1,
      effectFailBefore: 0.1,
      effectFailAfter: 0.05,
    });
  });

  it('leaves the faults it is not given at zero and tolerates spaces', () => {
    expect(parseFaults(' busDuplicate = 1 , effectFailAfter=0 ')).toEqual({ ...noFaults, busDuplicate: 1 });
  });

  it.each([undefined, '', '   '])('means no faults for %j', (spec) => {
    expect(parseFaults(spec)).toEqual(noFaults);
  });

  it('accepts the bounds 0 and 1', () => {
    expect(parseFaults('busReject=0,busAckLoss=1')).toEqual({ ...noFaults, busAckLoss: 1 });
  });

  it('rejects an unknown fault name, naming it', () => {
    expect(() => parseFaults('busReject=0.1,busExplode=0.2')).toThrow(/PIPELINE_FAULTS: .*busExplode/);
  });

  it.each(['1.5', '-0.1', 'abc'])('rejects the rate %s, naming the fault', (value) => {
    expect(() => parseFaults(`busAckLoss=${value}`)).toThrow(/PIPELINE_FAULTS: busAckLoss:/);
  });

  it.each(['busReject', 'busReject=0.1=0.2', '=0.1', 'busReject=0.1,', 'busReject=', 'busReject= '])(
    'rejects the malformed spec %j, quoting the part',
    (spec) => {
      expect(() => parseFaults(spec)).toThrow(/PIPELINE_FAULTS: ".*" is not name=rate/);
    },
  );
});

describe('seededRandom', () => {
  const draw = (seed: number, n = 20) => {
    const random = seededRandom(seed);
    return Array.from({ length: n }, () => random());
  };

  it('repeats the same sequence for the same seed', () => {
    expect(draw(42)).toEqual(draw(42));
  });

  it('gives different sequences for different seeds', () => {
    expect(draw(42)).not.toEqual(draw(43));
  });

  it('draws in [0, 1) and not a constant', () => {
    const values = draw(7, 1_000);
    for (const v of values) {
      expect(v).toBeGreaterThanOrEqual(0);
      expect(v).toBeLessThan(1);
    }
    expect(new Set(values).size).toBeGreaterThan(990);
  });
});

describe('FaultInjector', () => {
  const rates = (r: Partial<FaultRates>): FaultRates => ({ ...noFaults, ...r });
  const strikeCount = (injector: FaultInjector, fault: keyof FaultRates, n: number) =>
    Array.from({ length: n }, () => injector.strikes(fault)).filter(Boolean).length;

  it('strikes about as often as the rate says (10% ± 3% over 10,000 draws)', () => {
    const hits = strikeCount(new FaultInjector(rates({ busReject: 0.1 }), 1234), 'busReject', 10_000);
    expect(hits).toBeGreaterThan(700);
    expect(hits).toBeLessThan(1_300);
  });

  it('never strikes at rate 0 and always strikes at rate 1', () => {
    const injector = new FaultInjector(rates({ busDuplicate: 1 }), 1);
    expect(strikeCount(injector, 'busReject', 1_000)).toBe(0);
    expect(strikeCount(injector, 'busDuplicate', 1_000)).toBe(1_000);
  });

  it('makes the same decisions for the same seed', () => {
    const decisions = (seed: number) => {
      const injector = new FaultInjector(rates({ busAckLoss: 0.5 }), seed);
      return Array.from({ length: 200 }, () => injector.strikes('busAckLoss'));
    };
    expect(decisions(99)).toEqual(decisions(99));
    expect(decisions(99)).not.toEqual(decisions(100));
  });

  it('is active only when some rate is above zero', () => {
    expect(new FaultInjector(noFaults, 1).active).toBe(false);
    expect(new FaultInjector(rates({ effectFailAfter: 0.01 }), 1).active).toBe(true);
  });
});
