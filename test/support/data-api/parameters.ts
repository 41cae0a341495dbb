import { ApiError, validation } from './errors';
import type { WireParameter } from './types';

// Parameter bindings, as pgjdbc sends them (I): setString binds varchar, which is the whole point;
// dates and times go unspecified so PostgreSQL fits them to the column (timestamp or timestamptz).
const oid = {
  unspecified: 0,
  bool: 16,
  bytea: 17,
  int8: 20,
  json: 114,
  float8: 701,
  varchar: 1043,
  uuid: 2950,
};
const numericOid = 1700;
const timestampHint = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,9})?$/;
const dateHint = /^\d{4}-\d{2}-\d{2}$/;
const timeHint = /^\d{2}:\d{2}:\d{2}(\.\d{1,9})?$/;

/** One bound value and the type PostgreSQL must see it as. */
export function bindParameter(p: WireParameter): { oid: number; value: unknown } {
  const field = p.value ?? {};
  const kinds = Object.keys(field).filter((k) => field[k] !== undefined);
  if (kinds.length !== 1)
    throw new ApiError(400, 'BadRequestException', `Parameter "${p.name}" has value with no field set`);
  const kind = kinds[0] as string;
  const v = field[kind];
  if (kind === 'arrayValue') throw validation('Array parameters are not supported');
  if (p.typeHint && kind !== 'stringValue')
    throw validation(`The ${p.typeHint} type hint requires a stringValue`); // (I)
  switch (kind) {
    case 'isNull':
      return { oid: oid.unspecified, value: null };
    case 'booleanValue':
      return { oid: oid.bool, value: String(v) };
    case 'longValue':
      return { oid: oid.int8, value: String(v) };
    case 'doubleValue':
      return { oid: oid.float8, value: String(v) };
    case 'blobValue':
      return { oid: oid.bytea, value: Buffer.from(String(v), 'base64') };
    case 'stringValue':
      break;
    default:
      throw validation(`Unsupported parameter value ${kind}`);
  }
  const s = String(v);
  switch (p.typeHint) {
    case undefined:
      return { oid: oid.varchar, value: s };
    case 'UUID':
      return { oid: oid.uuid, value: s };
    case 'JSON':
      return { oid: oid.json, value: s };
    case 'DECIMAL':
      return { oid: numericOid, value: s };
    case 'TIMESTAMP':
      if (!timestampHint.test(s)) throw validation('Parse Error for TimeStamp'); // (I) exception name
      return { oid: oid.unspecified, value: s };
    case 'DATE':
      if (!dateHint.test(s)) throw validation('Parse Error for Date'); // (I)
      return { oid: oid.unspecified, value: s };
    case 'TIME':
      if (!timeHint.test(s)) throw validation('Parse Error for Time'); // (I)
      return { oid: oid.unspecified, value: s };
    default:
      throw validation(`Invalid typeHint ${p.typeHint}`);
  }
}
