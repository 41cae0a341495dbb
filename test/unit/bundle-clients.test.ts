import { describe, expect, it } from 'vitest';
import { sdkClientsIn } from '../rehearsal/bundle-clients';

describe('the SDK clients a bundle holds', () => {
  it('are the service ids its clients default to, sorted, without the credential chain', () => {
    const bundle =
      'var a={serviceId:t?.serviceId??"RDS Data"};var b={serviceId:e?.serviceId??"STS"};' +
      'x={serviceId:$1?.serviceId??"EventBridge"};y={serviceId:t?.serviceId??"SSO OIDC"};' +
      'z={serviceId:r?.serviceId??"RDS Data"};w={serviceId:n?.serviceId??"Signin"}';
    expect(sdkClientsIn(bundle)).toEqual(['EventBridge', 'RDS Data']);
  });

  it('are none in a bundle without a client', () => {
    expect(sdkClientsIn('export const handler = async () => ({ statusCode: 200 });')).toEqual([]);
  });
});
