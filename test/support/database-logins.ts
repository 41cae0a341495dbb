import { type FunctionRole, type RoleLogin, roleName } from '../../shared/db/roles';

/** The login of a function role in tests: a fixed password, set once for the whole run (roles are cluster-wide). */
export const testLogin = (role: FunctionRole): RoleLogin => ({
  username: roleName(role),
  password: `${roleName(role)}-test-password`,
});
