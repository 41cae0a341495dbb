/**
 * The local server's port when PORT is unset (`npm start`), and where the ops CLI looks for it:
 * the one fact the emulator and the operator's tools share, so it lives outside both.
 */
export const defaultPort = 3000;
