// ESLint for the TypeScript API, its tests, the benches and the scripts
// (`npm run lint`); formatting is Prettier's (`npm run format:check`).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'build*/**',
      'prebuilds/**',
      'node_modules/**',
      'bench/results/**',
      'bench/peers/**',
      'test/fixtures/**',
      '.bench-data/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.{ts,js,mjs,cjs}'],
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { ...globals.node } },
    rules: {
      // Unused arguments named with a leading underscore are deliberate (callbacks with a fixed shape).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Plain JavaScript (benches, scripts, test helpers): no type annotations to check.
    files: ['**/*.{js,mjs,cjs}'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
