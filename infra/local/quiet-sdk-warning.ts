// Imported first by the entry points (`npm start`, the rehearsal) for its effect: SDK clients
// built at module scope by what they import must already find the switch set.
import { quietSdkNodeVersionWarning } from '../../shared/sdk-warnings';

quietSdkNodeVersionWarning();
